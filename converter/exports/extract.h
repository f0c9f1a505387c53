// `iris extract ARCHIVE NAME -o FILE`: one embedded file (config.json, the tokenizer files,
// ...) out of an archive, checked against its checksum and decompressed.
#pragma once

#include <string>

#include "common/atomic_output.h"
#include "common/status.h"

namespace iris {

struct ExtractOptions {
  std::string archive;
  std::string name;     // as `iris inspect` lists it
  std::string output;   // "-": standard output
  bool overwrite = false;
  PartialFileRegistry* partial_files = nullptr;
};

// The bytes written. kInvalidInput naming the files the archive does hold when NAME is not one.
Result<uint64_t> run_extract(const ExtractOptions& options);

}  // namespace iris
