// NVFP4 (FORMATS.md 7.1, 7.4): E2M1 codes packed two a byte, an E4M3 scale per 16 elements
// and an FP32 scale per matrix, as two tools store them:
//   ModelOpt            P.weight U8 [..., N, K/2] + P.weight_scale F8_E4M3 [..., N, K/16]
//                       + P.weight_scale_2 F32 (one a matrix; multiplies)            -> P.weight
//   compressed-tensors  P.weight_packed U8 [..., N, K/2] + P.weight_scale F8_E4M3
//   nvfp4-pack-quantized [..., N, K/16] + P.weight_global_scale F32 [1] (divides)   -> P.weight
// Both become the nvfp4 archive format as stored (FORMAT.md 4.6), with the tool's convention
// for the tensor scale and for code 8. An activation scale beside them (input_scale,
// input_global_scale) is a tensor of its own, carried raw.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/float_bits.h"
#include "formats/fused_projections.h"

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace nvfp4_packed {

constexpr const char* kModelOptScale = ".weight_scale_2";
constexpr const char* kCtScale = ".weight_global_scale";

std::string strip(const std::string& name, const char* suffix) { return name.substr(0, name.size() - std::string(suffix).size()); }

// The weight whose group a tensor belongs to: any of ModelOpt's (the codes P.weight beside a
// P.weight_scale_2, its block scales, the second scale) or compressed-tensors' (weight_packed and
// weight_scale beside a weight_global_scale). A part that is missing is the group's error. Whichever the file lists first starts
// the group; the others are then its parts (source_tensors.cpp). Before the FP8 scheme in the
// table, so that P.weight_scale is NVFP4's where a global scale stands beside it.
std::string group_of(const Snapshot& snap, const std::string& name) {
  auto has = [&](const std::string& base, const char* suffix) { return snap.find(base + suffix) != nullptr; };
  for (const char* suffix : {kModelOptScale, kCtScale, ".weight_scale", ".weight_packed", ".weight"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string base = strip(name, suffix);
    if (has(base, kModelOptScale) || has(base, kCtScale)) return base + ".weight";
  }
  return "";
}

// The FP32 value of a one-value tensor scale (shape checked by the caller).
float scalar_of(const SnapshotTensor& t, uint64_t m) {
  float v;
  std::memcpy(&v, t.file->data(*t.tensor).data() + 4 * m, 4);
  return v;
}

// What the checkpoint's scales promise (semantic lint, errors unless allowed): finite, nonzero
// global scales (compressed-tensors divides by its own); no NaN among the E4M3 block scales
// (0x7F, 0xFF); and the projections engines fuse (q/k/v, gate/up, w1/w3) sharing one global
// scale, as both tools write them -- a fused GEMM otherwise takes one of them for all (the
// trap vllm-project/vllm#54974 and NVIDIA/TensorRT-LLM#14199 warn of).
Status check_scales(const Snapshot& snap, const std::string& weight, const SnapshotTensor& scales, const SnapshotTensor& global,
                    const char* global_suffix, bool divides, uint64_t batch, const PackedIntegerAllowances& allow) {
  if (!allow.suspect_scales) {
    for (uint64_t m = 0; m < batch; ++m) {
      const float t = scalar_of(global, m);
      if (!std::isfinite(t) || (divides && t == 0.f))
        return invalid_input(where(global) + "NVFP4 global scale " + std::to_string(t) + (divides ? " (it divides)" : "") +
                             " is not finite and nonzero: the weights would decode as NaN or Inf (--allow-suspect-scales to accept)");
    }
    const auto bytes = scales.file->data(*scales.tensor);
    const uint64_t nan = uint64_t(std::count_if(bytes.begin(), bytes.end(), [](uint8_t b) { return (b & 0x7F) == 0x7F; }));
    if (nan)
      return invalid_input(where(scales) + std::to_string(nan) + " E4M3 block scales are NaN: their blocks would decode as NaN (--allow-suspect-scales to accept)");
  }
  if (allow.fused_scale_mismatch) return Status::ok();
  const std::string base = strip(weight, ".weight");
  for (const std::string& sibling : fused_sibling_names(base)) {
    const SnapshotTensor* other = snap.find(sibling + global_suffix);
    if (!other || other->tensor->dtype != DType::kF32 || other->tensor->numel != batch) continue;
    for (uint64_t m = 0; m < batch; ++m)
      if (f32_bits(scalar_of(*other, m)) != f32_bits(scalar_of(global, m)))
        return invalid_input(where(global) + "NVFP4 global scale " + std::to_string(scalar_of(global, m)) + " differs from its fused sibling '" +
                             other->tensor->name + "' (" + std::to_string(scalar_of(*other, m)) +
                             "): an engine that fuses them uses one for both (--allow-fused-scale-mismatch keeps each its own, as stored)");
  }
  return Status::ok();
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& first, const std::string& weight, const GroupingOptions& options) {
  const std::string base = strip(weight, ".weight");
  const bool modelopt = snap.find(base + kModelOptScale) != nullptr;
  const char* tool = modelopt ? "ModelOpt NVFP4" : "compressed-tensors NVFP4";
  const SnapshotTensor* codes = snap.find(modelopt ? weight : base + ".weight_packed");
  const SnapshotTensor* scales = snap.find(base + ".weight_scale");
  const SnapshotTensor* global = snap.find(base + (modelopt ? kModelOptScale : kCtScale));
  if (!codes) return invalid_input(where(first) + tool + " scale without its codes '" + (modelopt ? weight : base + ".weight_packed") + "'");
  if (!scales) return invalid_input(where(*codes) + tool + " codes without their block scales '" + base + ".weight_scale'");
  const auto& c = *codes->tensor;
  const auto& s = *scales->tensor;
  const auto& g = *global->tensor;
  if (c.dtype != DType::kU8 || c.shape.size() < 2 || c.shape.back() == 0)
    return invalid_input(where(*codes) + tool + " codes must be U8 [..., N, K/2], not " + std::string(dtype_st_name(c.dtype)) + " " + shape_str(c.shape));
  const uint64_t k = c.shape.back() * 2;
  if (k % 16 != 0)
    return invalid_input(where(*codes) + tool + " codes hold " + std::to_string(k) + " elements a row, not a multiple of the 16-element block");
  if (s.dtype != DType::kF8_E4M3 && s.dtype != DType::kU8)
    return invalid_input(where(*scales) + tool + " block scales must be F8_E4M3, not " + std::string(dtype_st_name(s.dtype)));
  std::vector<uint64_t> want(c.shape.begin(), c.shape.end());
  want.back() = k / 16;
  if (s.shape != want)
    return invalid_input(where(*scales) + "shape " + shape_str(s.shape) + " is not one E4M3 scale per 16 elements of codes " + shape_str(c.shape) +
                         " (expected " + shape_str(want) + ")");
  uint64_t batch = 1;
  for (size_t i = 0; i + 2 < c.shape.size(); ++i) batch *= c.shape[i];
  const std::vector<uint64_t> prefix(c.shape.begin(), c.shape.end() - 2);
  // One FP32 scale a matrix: [] or [1] for one, the stack's dimensions (or those and a 1) for a stack.
  std::vector<uint64_t> prefix1 = prefix;
  prefix1.push_back(1);
  const bool shape_ok = g.shape == prefix || g.shape == prefix1 || (batch == 1 && g.numel == 1 && g.shape.size() <= 1);
  if (g.dtype != DType::kF32 || !shape_ok)
    return invalid_input(where(*global) + tool + " tensor scale must be F32 with one value per matrix (" + std::to_string(batch) + "), not " +
                         std::string(dtype_st_name(g.dtype)) + " " + shape_str(g.shape));
  IRIS_TRY(check_scales(snap, weight, *scales, *global, modelopt ? kModelOptScale : kCtScale, !modelopt, batch, options.packed));
  SourceTensor t;
  t.desc.name = weight;
  t.desc.shape = c.shape;
  t.desc.shape.back() = k;
  // The dtype each tool dequantizes to: ModelOpt the model's, compressed-tensors BF16.
  t.desc.dtype = modelopt ? logical_float_dtype(snap) : DType::kBF16;
  t.desc.format = Format::kNvfp4;
  t.desc.params = {{"block_size", 16},
                   {"element", "e2m1"},
                   {"scale_encoding", "e4m3"},
                   {"nibble_order", "low_first"},
                   {"tensor_scale", modelopt ? "multiplies" : "divides"},
                   {"negative_zero", !modelopt},
                   {"tensor_scale_shape", g.shape}};
  t.parts = {{Role::kCodes, *codes}, {Role::kScales, *scales}, {Role::kTensorScale, *global}};
  return t;
}

// Every NVFP4 tensor starts or joins a group (group_of), whose making names what is missing:
// none is left to be an orphan.
Status check_unclaimed(const Snapshot&, const SnapshotTensor&, const GroupingOptions&) { return Status::ok(); }

}  // namespace nvfp4_packed

const CheckpointScheme kNvfp4Packed{"NVFP4 (ModelOpt, compressed-tensors)", {"modelopt", "compressed-tensors"}, {".weight_scale_2", ".weight_global_scale"}, true, nvfp4_packed::group_of,
                                    nvfp4_packed::group, nvfp4_packed::check_unclaimed};

}  // namespace iris::schemes
