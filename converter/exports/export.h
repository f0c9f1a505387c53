// `iris export`: an archive back to a standard safetensors file.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <string>

#include "common/atomic_output.h"
#include "common/status.h"
#include "formats/dtype.h"

namespace iris {

struct ExportOptions {
  std::string archive;
  std::string output;
  std::string format = "safetensors";  // safetensors | iris-v1 (the seed engine's archive)
  std::string dtype = "keep";  // keep | bf16 | f16 | f32
  uint64_t max_shard_bytes = 5000000000;  // folder exports (output ending in '/' or a folder): transformers' 5GB
  bool overwrite = false;
  std::function<void(uint64_t, uint64_t)> progress;  // (bytes done, bytes total)
  PartialFileRegistry* partial_files = nullptr;
};

struct ExportReport {
  size_t tensors = 0;
  uint64_t bytes = 0;
};

// keep: unquantized tensors bit for bit, quantized tensors as the companion tensors they
// came from (bytes exactly as in the source checkpoint; requantized tensors in their
// format's Hugging Face convention). bf16/f16/f32: float tensors converted (round to nearest
// even), quantized tensors dequantized by the CPU reference of quant/ and rounded once.
Result<ExportReport> run_export(const ExportOptions& options);

class IrisArchive;
struct SafetensorsEntry;
// What export writes for each tensor of `a`, in manifest order, as Hugging Face names, dtypes
// and shapes with their producers (each checks its tensor's checksums first): target empty
// is `keep`. Shared by the safetensors and the v1 writers.
Result<std::vector<SafetensorsEntry>> export_entries(const IrisArchive& a, std::optional<DType> target);
// --dtype: keep (empty) or the float type every tensor is written as.
Result<std::optional<DType>> export_dtype(const std::string& name);

}  // namespace iris
