// Streams a standard safetensors file (FORMATS.md 1.4 conventions): tensors ordered by
// descending dtype alignment then name, compact header padded with spaces to 8 bytes,
// written to a temporary name and renamed when complete.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/status.h"
#include "formats/byte_sink.h"
#include "formats/dtype.h"

namespace iris {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  ComponentProducer producer;  // must write exactly numel * bits / 8 bytes
};

struct SafetensorsWriteOptions {
  bool overwrite = false;
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::function<void(uint64_t, uint64_t)> progress;
  PartialFileRegistry* partial_files = nullptr;  // see WriteOptions
};

Status write_safetensors(const std::string& path, std::vector<SafetensorsEntry> entries,
                         const SafetensorsWriteOptions& options);

}  // namespace iris
