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
// The logical tensor of a packed-integer weight (packed_integers.h): its dequantized values,
// raw in the scale's dtype (F32 scales: the model's), checked first; its checkpoint tensors
// the codes, the scales, then `companions` and a g_idx where it has one.
inline Result<SourceTensor> packed_integer_tensor(const Snapshot& snap, const std::string& weight, std::shared_ptr<PackedIntegers> p,
                                                  bool columns_in_order, bool symmetric, const GroupingOptions& options,
                                                  std::vector<SourcePart> companions) {
  IRIS_TRY(check_packed_integers(*p, columns_in_order, symmetric, options.packed));
  SourceTensor t;
  t.desc.name = weight;
  t.desc.shape = {p->n, p->k};
  t.desc.dtype = p->scale_dtype == DType::kF32 ? logical_float_dtype(snap) : p->scale_dtype;
  t.desc.format = Format::kRaw;
  t.parts = {{Role::kCodes, p->codes}, {Role::kScales, p->scales}};
  for (auto& c : companions) t.parts.push_back(std::move(c));
  if (p->g_idx.tensor) t.parts.push_back({Role::kData, p->g_idx, std::nullopt, "companion"});
  t.packed = std::move(p);
  return t;
}

// A packed-integer weight's g_idx companion: I32 [k], one group a column.
inline Status check_g_idx_shape(const SnapshotTensor& g_idx, uint64_t k) {
  const auto& g = *g_idx.tensor;
  if (g.dtype == DType::kI32 && g.shape == std::vector<uint64_t>{k}) return Status::ok();
  return invalid_input(where(g_idx) + "g_idx must be I32 [" + std::to_string(k) + "], not " + std::string(dtype_st_name(g.dtype)) + " " +
                       shape_str(g.shape));
}

}  // namespace iris::schemes
