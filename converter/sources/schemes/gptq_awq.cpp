// GPTQ (v1 and gptq_v2) and AWQ (GEMM) checkpoints (FORMATS.md 7.2, 7.3): P.qweight I32 +
// P.qzeros I32 + P.scales [+ P.g_idx I32] -> P.weight. The two share the companions' names and
// differ in packing, so quantization_config.quant_method says which; packed_integers.h says
// where each packs a code.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include <cctype>
#include <cstring>

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace gptq_awq {

using nlohmann::json;

struct Declared {
  std::string method;  // "gptq" or "awq"
  int bits = 4;
  int64_t group_size = 128;  // -1: one group a row
  bool desc_act = false, sym = true, v2 = false;
};

std::string config_where(const Snapshot& snap) { return snap.folder() + "/config.json: quantization_config"; }

// The integer at `keys[0]` (or the first of its aliases) of the config, `fallback` where absent.
Result<int64_t> int_of(const json& qc, std::initializer_list<const char*> keys, int64_t fallback, const std::string& at) {
  for (const char* key : keys) {
    auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return invalid_input(at + "." + key + " is " + it->dump() + ", not an integer");
    return it->get<int64_t>();
  }
  return fallback;
}
Result<bool> bool_of(const json& qc, const char* key, bool fallback, const std::string& at) {
  auto it = qc.find(key);
  if (it == qc.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return invalid_input(at + "." + key + " is " + it->dump() + ", not true or false");
  return it->get<bool>();
}
std::string string_of(const json& qc, const char* key) {
  auto it = qc.find(key);
  return it != qc.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<Declared> declared(const Snapshot& snap) {
  const json& qc = snap.config().quantization_config;
  const std::string at = config_where(snap);
  Declared d;
  d.method = quant_method(snap);
  IRIS_ASSIGN_OR_RETURN(int64_t bits, int_of(qc, {"bits", "w_bit"}, 4, at));
  IRIS_ASSIGN_OR_RETURN(d.group_size, int_of(qc, {"group_size", "q_group_size"}, 128, at));
  if (d.method == "gptq") {
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8) return unsupported(at + ".bits " + std::to_string(bits) + ": GPTQ packs 2, 3, 4 or 8 bits");
    IRIS_ASSIGN_OR_RETURN(d.desc_act, bool_of(qc, "desc_act", false, at));
    IRIS_ASSIGN_OR_RETURN(d.sym, bool_of(qc, "sym", true, at));
    const std::string format = string_of(qc, "checkpoint_format").empty() ? string_of(qc, "format") : string_of(qc, "checkpoint_format");
    if (!format.empty() && format != "gptq" && format != "gptq_v2")
      return unsupported(at + ".checkpoint_format '" + format + "': iris reads GPTQ's gptq (v1) and gptq_v2 packing");
    d.v2 = format == "gptq_v2";
    const std::string pack = string_of(qc, "pack_dtype");
    if (!pack.empty() && pack != "int32" && pack != "torch.int32")
      return unsupported(at + ".pack_dtype '" + pack + "': iris reads GPTQ codes packed in int32 words");
  } else {
    if (bits != 4) return unsupported(at + ".bits " + std::to_string(bits) + ": AWQ's GEMM packing holds 4 bits");
    std::string version = string_of(qc, "version");
    for (auto& ch : version) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (!version.empty() && version != "gemm")
      return unsupported(at + ".version '" + string_of(qc, "version") + "': iris reads AWQ's GEMM packing");
    IRIS_ASSIGN_OR_RETURN(bool zero_point, bool_of(qc, "zero_point", true, at));
    if (!zero_point) return unsupported(at + ".zero_point false: iris reads AWQ GEMM checkpoints with zero points");
  }
  if (d.group_size == 0 || d.group_size < -1) return invalid_input(at + ".group_size " + std::to_string(d.group_size) + " is not -1 or positive");
  d.bits = int(bits);
  return d;
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& qweight, const std::string& weight, const GroupingOptions& options) {
  const std::string base = weight.substr(0, weight.size() - 7);  // P of P.weight
  IRIS_ASSIGN_OR_RETURN(Declared d, declared(snap));
  const bool gptq = d.method == "gptq";
  auto companion = [&](const char* suffix) { return snap.find(base + suffix); };
  const SnapshotTensor* qzeros = companion(".qzeros");
  const SnapshotTensor* scales = companion(".scales");
  const SnapshotTensor* g_idx = companion(".g_idx");
  if (!scales) return invalid_input(where(qweight) + "packed weight without its '" + base + ".scales' companion");
  if (!qzeros) return invalid_input(where(qweight) + "packed weight without its '" + base + ".qzeros' companion");
  if (!gptq && g_idx) return invalid_input(where(*g_idx) + "AWQ checkpoints have no g_idx; this one is not AWQ GEMM as the config says");
  const auto& w = *qweight.tensor;
  const auto& s = *scales->tensor;
  const auto& z = *qzeros->tensor;
  if (w.dtype != DType::kI32 || w.shape.size() != 2)
    return invalid_input(where(qweight) + "packed codes must be a 2-D I32 tensor, not " + std::string(dtype_st_name(w.dtype)) + " " + shape_str(w.shape));
  if (z.dtype != DType::kI32 || z.shape.size() != 2)
    return invalid_input(where(*qzeros) + "packed zero points must be a 2-D I32 tensor, not " + std::string(dtype_st_name(z.dtype)) + " " +
                         shape_str(z.shape));
  if ((s.dtype != DType::kF16 && s.dtype != DType::kBF16 && s.dtype != DType::kF32) || s.shape.size() != 2)
    return invalid_input(where(*scales) + "scales must be a 2-D F16, BF16 or F32 tensor, not " + std::string(dtype_st_name(s.dtype)) + " " +
                         shape_str(s.shape));
  auto p = std::make_shared<PackedIntegers>();
  p->packing = gptq ? IntPacking::kGptq : IntPacking::kAwq;
  p->scheme = gptq ? (d.v2 ? "GPTQ v2" : "GPTQ v1") : "AWQ GEMM";
  p->bits = d.bits;
  p->scale_dtype = s.dtype;
  p->gptq_v1 = gptq && !d.v2;  // v1 stores zero - 1 (packed_integers.h says how)
  if (gptq) {
    p->n = w.shape[1];
    if ((w.shape[0] * 32) % uint64_t(d.bits)) return invalid_input(where(qweight) + shape_str(w.shape) + " rows of words do not hold whole " + std::to_string(d.bits) + "-bit codes");
    p->k = w.shape[0] * 32 / uint64_t(d.bits);
  } else {
    p->k = w.shape[0];
    p->n = w.shape[1] * 8;
  }
  if (p->n == 0 || p->k == 0) return invalid_input(where(qweight) + "an empty matrix " + shape_str(w.shape));
  p->group = d.group_size == -1 ? p->k : uint64_t(d.group_size);
  p->groups = (p->k + p->group - 1) / p->group;
  const std::string declared_text = std::string(gptq ? "GPTQ " : "AWQ ") + std::to_string(d.bits) + "-bit, group_size " + std::to_string(d.group_size);
  // Declared against stored: the scales' rows are the groups, their columns the outputs.
  if (s.shape[0] != p->groups || s.shape[1] != p->n)
    return invalid_input(where(*scales) + "shape " + shape_str(s.shape) + " is not [" + std::to_string(p->groups) + ", " + std::to_string(p->n) +
                         "], the groups and outputs of a " + std::to_string(p->n) + "x" + std::to_string(p->k) + " weight as " + declared_text +
                         " packs it (declared and stored group size disagree)");
  const uint64_t zero_cols = gptq ? p->n * uint64_t(d.bits) / 32 : p->n / 8;
  if ((gptq && (p->n * uint64_t(d.bits)) % 32) || z.shape[0] != p->groups || z.shape[1] != zero_cols)
    return invalid_input(where(*qzeros) + "shape " + shape_str(z.shape) + " is not [" + std::to_string(p->groups) + ", " + std::to_string(zero_cols) +
                         "] for a " + std::to_string(p->n) + "x" + std::to_string(p->k) + " weight as " + declared_text + " packs its zero points");
  if (g_idx) {
    IRIS_TRY(check_g_idx_shape(*g_idx, p->k));
  } else if (gptq && d.desc_act) {
    return invalid_input(where(qweight) + "the config says desc_act true, but the weight has no '" + base + ".g_idx' to say each column's group");
  }
  p->codes = qweight;
  p->scales = *scales;
  p->zeros = *qzeros;
  if (g_idx) p->g_idx = *g_idx;
  return packed_integer_tensor(snap, weight, std::move(p), !d.desc_act, d.sym, options, {{Role::kData, *qzeros, std::nullopt, "zero_points"}});
}

std::string group_of(const Snapshot& snap, const std::string& name) {
  if (!name.ends_with(".qweight")) return "";
  const std::string method = quant_method(snap);
  return method == "gptq" || method == "awq" ? name.substr(0, name.size() - 8) + ".weight" : "";
}

Status check_unclaimed(const Snapshot& snap, const SnapshotTensor& st, const GroupingOptions&) {
  const std::string& name = st.tensor->name;
  for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string base = name.substr(0, name.size() - std::strlen(suffix));
    const std::string method = quant_method(snap);
    if (std::string_view(suffix) == ".qweight")
      return unsupported(where(st) + "packed codes of GPTQ or AWQ, but config.json's quantization_config does not say which (quant_method '" +
                         method + "'), and the two pack differently");
    if ((method == "gptq" || method == "awq") && !snap.find(base + ".qweight"))
      return invalid_input(where(st) + "a " + method + " companion without its '" + base + ".qweight'");
  }
  return Status::ok();
}

}  // namespace gptq_awq

const CheckpointScheme kGptqAwq{"GPTQ / AWQ packed integers", {"gptq", "awq"}, {".qweight", ".qzeros", ".g_idx"}, true,
                                gptq_awq::group_of, gptq_awq::group, gptq_awq::check_unclaimed};

}  // namespace iris::schemes
