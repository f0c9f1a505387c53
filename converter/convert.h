// The conversion pipeline: snapshot -> logical tensors -> layout -> archive.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "formats/iris_writer.h"
#include "formats/tensor_desc.h"

namespace iris {

struct ConvertOptions {
  std::string source;
  std::string output;
  bool overwrite = false;
  uint64_t tile_n = kDefaultTileN;
  uint64_t tile_k = kDefaultTileK;
  bool show_progress = true;
};

struct ConvertReport {
  WriteSummary written;
  uint64_t source_bytes = 0;
  size_t tensors = 0;
  size_t quantized_tensors = 0;
  std::vector<std::string> warnings;
  double seconds = 0;
  nlohmann::json to_json() const;
};

Result<ConvertReport> run_convert(const ConvertOptions& options);

}  // namespace iris
