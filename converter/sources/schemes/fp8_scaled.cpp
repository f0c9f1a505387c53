// FP8 E4M3 with a scale companion (FORMATS.md 4.3): P.weight F8_E4M3 + P.weight_scale_inv
// (the DeepSeek / transformers FineGrainedFP8 block scales, multiplied) or P.weight_scale (per
// tensor, channel, block or group: fbgemm_fp8, compressed-tensors float-quantized, ModelOpt
// FP8) -> P.weight.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include "common/checked_math.h"

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace fp8_scaled {

using nlohmann::json;

Result<SourceTensor> group_fp8(const Snapshot& snap, const SnapshotTensor& weight, const SnapshotTensor& scale,
                               const std::string& scale_suffix) {
  const auto& w = *weight.tensor;
  const auto& s = *scale.tensor;
  if (w.shape.size() < 2) return invalid_input(where(weight) + "FP8 weight must have rank >= 2, has shape " + shape_str(w.shape));
  if (s.dtype != DType::kF32 && s.dtype != DType::kBF16 && s.dtype != DType::kF16)
    return invalid_input(where(scale) + "FP8 scale must be F32, BF16 or F16, not " + std::string(dtype_st_name(s.dtype)));
  const uint64_t n = w.shape[w.shape.size() - 2], k = w.shape.back();
  uint64_t batch = 1;
  for (size_t i = 0; i + 2 < w.shape.size(); ++i) batch *= w.shape[i];
  std::vector<uint64_t> prefix(w.shape.begin(), w.shape.end() - 2);
  SourceTensor t;
  t.desc.name = w.name;
  t.desc.shape = w.shape;
  t.desc.dtype = s.dtype == DType::kF32 ? logical_float_dtype(snap) : s.dtype;
  t.desc.format = Format::kFp8E4M3;
  t.desc.params = {{"scale_dtype", std::string(dtype_archive_name(s.dtype))}, {"scale_shape", s.shape}, {"scale_name", scale_suffix}};
  // Block size: DeepSeek/HF weight_block_size, or compressed-tensors block_structure.
  uint64_t bn = 128, bk = 128;
  const json& qc = snap.config().quantization_config;
  if (qc.is_object()) {
    auto wbs = qc.find("weight_block_size");
    if (wbs != qc.end()) {
      // Validated before any decoder divides by it.
      if (!wbs->is_array() || wbs->size() != 2 || !(*wbs)[0].is_number_unsigned() || !(*wbs)[1].is_number_unsigned() ||
          (*wbs)[0].get<uint64_t>() == 0 || (*wbs)[1].get<uint64_t>() == 0 || (*wbs)[0].get<uint64_t>() > (1u << 20) ||
          (*wbs)[1].get<uint64_t>() > (1u << 20))
        return invalid_input(snap.folder() + "/config.json: quantization_config.weight_block_size " + wbs->dump() +
                             " is not two block sizes in [1, 2^20] (tensor '" + w.name + "')");
      bn = (*wbs)[0].get<uint64_t>();
      bk = (*wbs)[1].get<uint64_t>();
    }
  }
  const uint64_t sn = s.numel;
  std::vector<uint64_t> block_grid = prefix, channel = prefix;
  block_grid.push_back(ceil_div(n, bn ? bn : 1));
  block_grid.push_back(ceil_div(k, bk ? bk : 1));
  channel.push_back(n);
  std::vector<uint64_t> channel_col = channel;
  channel_col.push_back(1);
  if (scale_suffix == "weight_scale_inv" || (s.shape == block_grid && !(sn == batch * n))) {
    if (s.shape != block_grid)
      return invalid_input(where(scale) + "shape " + shape_str(s.shape) + " is not the " + std::to_string(bn) + "x" + std::to_string(bk) +
                           " block grid " + shape_str(block_grid) + " of weight " + shape_str(w.shape));
    t.desc.params["scale_granularity"] = "block";
    t.desc.params["block_n"] = bn;
    t.desc.params["block_k"] = bk;
  } else if (sn == batch && (s.shape.empty() || s.shape.back() == 1 || s.shape.size() <= prefix.size() + 1)) {
    t.desc.params["scale_granularity"] = "tensor";
  } else if (s.shape == channel || s.shape == channel_col) {
    t.desc.params["scale_granularity"] = "channel";
  } else if (s.shape.size() == prefix.size() + 2 && s.shape[prefix.size()] == n && s.shape.back() > 1 && k % s.shape.back() == 0) {
    t.desc.params["scale_granularity"] = "group";
    t.desc.params["group_size"] = k / s.shape.back();
  } else {
    return invalid_input(where(scale) + "shape " + shape_str(s.shape) + " fits no FP8 scale granularity (tensor, channel, block, group) for weight " +
                         shape_str(w.shape));
  }
  t.parts = {{Role::kCodes, weight}, {Role::kScales, scale}};
  return t;
}

std::string group_of(const Snapshot& snap, const std::string& name) {
  if (name.ends_with("_scale_inv")) return name.substr(0, name.size() - 10);
  // (compressed-tensors' packed integers have a weight_scale too: theirs. NVFP4's is claimed by
  // its own scheme, before this one in the table.)
  if (name.ends_with(".weight_scale") && !snap.find(name.substr(0, name.size() - 6) + "_packed")) return name.substr(0, name.size() - 6);
  return "";
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& scale, const std::string& weight_name, const GroupingOptions&) {
  const std::string& name = scale.tensor->name;
  const bool inv = name.ends_with("_scale_inv");
  const SnapshotTensor* weight = snap.find(weight_name);
  if (!weight) return invalid_input(where(scale) + "FP8 scale without its weight '" + weight_name + "'");
  if (weight->tensor->dtype != DType::kF8_E4M3)
    return invalid_input(where(*weight) + "has a scale companion '" + name + "' but dtype " + std::string(dtype_st_name(weight->tensor->dtype)) +
                         " (only F8_E4M3 weights are scaled)");
  if (inv && snap.find(weight_name + "_scale")) return invalid_input(where(*weight) + "has both weight_scale and weight_scale_inv");
  return group_fp8(snap, *weight, scale, inv ? "weight_scale_inv" : "weight_scale");
}

Status check_unclaimed(const Snapshot&, const SnapshotTensor& st, const GroupingOptions& options) {
  const DType dt = st.tensor->dtype;
  const std::string& name = st.tensor->name;
  if ((dt == DType::kF8_E4M3 || dt == DType::kF8_E5M2) && !options.allow_unscaled_fp8)
    return invalid_input(where(st) + std::string(dtype_st_name(dt)) + " tensor without a '" + name + "_scale_inv' or '" + name +
                         "_scale' companion; storing it raw would assume a scale of 1 (allow that explicitly to keep it raw)");
  return Status::ok();
}

}  // namespace fp8_scaled

const CheckpointScheme kFp8Scaled{"FP8 E4M3 with scales", {"fp8", "fbgemm_fp8"}, {"_scale_inv", ".weight_scale"}, true, fp8_scaled::group_of, fp8_scaled::group, fp8_scaled::check_unclaimed};

}  // namespace iris::schemes
