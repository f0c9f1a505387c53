// What the checkpoint schemes' files (sources/schemes/*.cpp) share: how an error names a
// tensor, a shape as text, the model's float type.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "converter/sources/source_tensors.h"

namespace iris::schemes {

// "FILE: tensor 'NAME': ", the start of every error about a snapshot tensor.
inline std::string where(const SnapshotTensor& t) { return t.file->path() + ": tensor '" + t.tensor->name + "': "; }
inline std::string shape_str(const std::vector<uint64_t>& s) { return nlohmann::json(s).dump(); }
// The dtype dequantized weights take: config.json's torch_dtype, else BF16.
inline DType logical_float_dtype(const Snapshot& snap) {
  if (auto d = dtype_from_torch_name(snap.config().torch_dtype)) return *d;
  return DType::kBF16;
}
// config.json's quantization_config.quant_method, or "".
std::string quant_method(const Snapshot& snap);

}  // namespace iris::schemes
