// bitsandbytes LLM.int8 (FORMATS.md 7.5; quantization_config load_in_8bit): P.weight I8 [N, K]
// + P.SCB F32 [N] (each row's absmax) + P.weight_format U8 (the layout; bitsandbytes writes 0,
// "row", and reads no other) -> P.weight, decoded as bitsandbytes' int8_vectorwise_dequant
// computes it: (q * SCB) * 7.874015718698502e-3, two FP32 roundings (packed_integers.h).
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"
#include "quant/int_group.h"

#include <cstring>

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace bitsandbytes_int8 {

// Linear8bitLt's weight_format codes (bitsandbytes nn/modules.py LINEAR_8BIT_WEIGHTS_FORMAT_MAPPING).
const char* format_name(uint8_t v) {
  switch (v) {
    case 0: return "row";
    case 1: return "col32";
    case 2: return "col_turing";
    case 3: return "col_ampere";
    default: return "unknown";
  }
}

std::string base_of(const std::string& weight) { return weight.substr(0, weight.size() - 7); }  // P of P.weight

// weight_format: a U8 scalar ([] as torch writes a 0-d tensor, or [1]) holding 0.
Status check_weight_format(const SnapshotTensor& f) {
  const auto& t = *f.tensor;
  const bool scalar = t.shape.empty() || t.shape == std::vector<uint64_t>{1};
  if (t.dtype != DType::kU8 || !scalar || t.size != 1)
    return invalid_input(where(f) + "weight_format must be one U8 value, not " + std::string(dtype_st_name(t.dtype)) + " " + shape_str(t.shape));
  const uint8_t v = f.file->data(t)[0];
  if (v != 0)
    return unsupported(where(f) + "weight_format " + std::to_string(v) + " (" + format_name(v) +
                       "): the codes are in a tiled layout of old bitsandbytes releases, which bitsandbytes itself no longer reads; "
                       "only 0 (row) is decoded");
  return Status::ok();
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& weight, const std::string& name, const GroupingOptions& options) {
  const std::string base = base_of(name);
  const SnapshotTensor* scb = snap.find(base + ".SCB");
  const SnapshotTensor* format = snap.find(base + ".weight_format");
  if (!scb) return invalid_input(where(weight) + "int8 codes without their '" + base + ".SCB' row scales");
  const auto& w = *weight.tensor;
  const auto& s = *scb->tensor;
  if (w.dtype != DType::kI8 || w.shape.size() != 2 || w.shape[0] == 0 || w.shape[1] == 0)
    return invalid_input(where(weight) + "LLM.int8 codes must be a 2-D I8 tensor, not " + std::string(dtype_st_name(w.dtype)) + " " + shape_str(w.shape));
  if (s.dtype != DType::kF32 || s.shape != std::vector<uint64_t>{w.shape[0]})
    return invalid_input(where(*scb) + "SCB must be F32 [" + std::to_string(w.shape[0]) + "] (one absmax a row of " + shape_str(w.shape) +
                         "), not " + std::string(dtype_st_name(s.dtype)) + " " + shape_str(s.shape));
  std::vector<SourcePart> companions;
  if (format) {
    IRIS_TRY(check_weight_format(*format));
    companions.push_back({Role::kData, *format, std::nullopt, "companion"});
  }
  auto p = std::make_shared<PackedIntegers>();
  p->packing = IntPacking::kBnbInt8;
  p->scheme = "bitsandbytes LLM.int8";
  p->bits = 8;
  p->n = w.shape[0];
  p->k = w.shape[1];
  p->group = p->k;
  p->groups = 1;
  p->implicit_zero = 128;
  p->scale_dtype = DType::kF32;
  p->post_factor = quant::kLlmInt8PostFactor;
  p->codes = weight;
  p->scales = *scb;
  return packed_integer_tensor(snap, name, std::move(p), true, true, options, std::move(companions));
}

// P.weight starts a group when it is I8 and has its P.SCB.
std::string group_of(const Snapshot& snap, const std::string& name) {
  if (!name.ends_with(".weight")) return "";
  const SnapshotTensor* t = snap.find(name);
  return t && t->tensor->dtype == DType::kI8 && snap.find(base_of(name) + ".SCB") ? name : "";
}

bool declared_int8(const Snapshot& snap) {
  const nlohmann::json& qc = snap.config().quantization_config;
  if (!qc.is_object() || quant_method(snap) != "bitsandbytes") return false;
  for (const char* key : {"load_in_8bit", "_load_in_8bit"})
    if (auto it = qc.find(key); it != qc.end() && it->is_boolean() && it->get<bool>()) return true;
  return false;
}

// An SCB or weight_format no group claimed: its weight is missing or is not int8 codes. And
// in a checkpoint that declares LLM.int8, I8 codes without their SCB, which would otherwise
// pass for a weight of integers.
Status check_unclaimed(const Snapshot& snap, const SnapshotTensor& st, const GroupingOptions&) {
  const std::string& name = st.tensor->name;
  if (name.ends_with(".weight") && st.tensor->dtype == DType::kI8 && declared_int8(snap))
    return invalid_input(where(st) + "int8 codes without their '" + base_of(name) + ".SCB' row scales (the config declares LLM.int8)");
  for (const char* suffix : {".SCB", ".weight_format"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string base = name.substr(0, name.size() - std::strlen(suffix));
    const SnapshotTensor* w = snap.find(base + ".weight");
    if (!w) return invalid_input(where(st) + "an LLM.int8 companion without its '" + base + ".weight'");
    return invalid_input(where(st) + "an LLM.int8 companion whose '" + base + ".weight' is " + std::string(dtype_st_name(w->tensor->dtype)) +
                         ", not the I8 codes it scales" + (name.ends_with(".SCB") ? "" : " (or has no '" + base + ".SCB')"));
  }
  return Status::ok();
}

}  // namespace bitsandbytes_int8

const CheckpointScheme kBitsandbytesInt8{"bitsandbytes LLM.int8 (int8 weights with SCB row scales)", {"bitsandbytes"}, {".SCB", ".weight_format"}, true,
                                         bitsandbytes_int8::group_of, bitsandbytes_int8::group, bitsandbytes_int8::check_unclaimed};

}  // namespace iris::schemes
