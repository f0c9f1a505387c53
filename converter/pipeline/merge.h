// `iris merge`: the parts of one conversion (`iris convert --part i/n`, converter/pipeline/parts.h)
// joined into the archive that conversion writes in one process, byte for byte.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_output.h"
#include "common/status.h"
#include "formats/iris_writer.h"

namespace iris {

struct MergeOptions {
  std::vector<std::string> parts;  // in any order
  std::string output;
  bool overwrite = false;
  std::function<void(uint64_t, uint64_t)> progress;
  PartialFileRegistry* partial_files = nullptr;
  bool direct_io = true;
  // Write the archive set the conversion writes with this --max-file-size (0: one file).
  uint64_t max_file_size = 0;
};

struct MergeReport {
  size_t parts = 0;
  size_t tensors = 0;
  WriteSummary written;
  double seconds = 0;
};

// Refuses, naming the file: an input that is not a part, parts of different conversions
// (plan fingerprints differ: source, options or iris version), a part given twice or two files
// of the same part, a missing part, parts whose tensor runs do not join, and a component or
// embedded file whose bytes do not match its checksum (then nothing is written).
Result<MergeReport> run_merge(const MergeOptions& o);

// What a merge writes when it is not the whole conversion (converter/pipeline/resume.cpp: the segments
// of a resumed --part run joined into that part's file): the run of tensors the inputs must
// cover, the manifest room of the file, and the part record it carries.
struct MergeTarget {
  uint64_t first_tensor = 0, tensors = 0;
  uint64_t manifest_reserve = 0;
  nlohmann::json part;
};
Result<MergeReport> merge_parts(const MergeOptions& o, const MergeTarget* target);

}  // namespace iris
