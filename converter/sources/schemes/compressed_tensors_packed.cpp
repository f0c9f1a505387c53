// compressed-tensors pack-quantized integers (FORMATS.md 7.1): P.weight_packed I32 +
// P.weight_scale + P.weight_shape [+ P.weight_zero_point, P.weight_g_idx] -> P.weight. A
// packed weight beside a weight_global_scale is NVFP4, another scheme; U8 codes without one are
// mxfp4-pack-quantized (compressed_tensors_mxfp4.cpp); packed_integers.h says where the
// codes and zero points sit.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include <cstring>
#include <set>

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace compressed_tensors_packed {

using nlohmann::json;

// One config group's weight arguments, as far as the packing needs them.
struct WeightArgs {
  int bits = 0;
  bool symmetric = true;
  bool channel = false;     // strategy "channel": one group a row
  uint64_t group_size = 0;  // strategy "group"
  bool actorder = false;    // actorder "group" or "weight"
  std::string group_name;
};

// Every integer config group's weight arguments (quant_scheme.cpp has already refused the
// formats and types iris does not read).
Result<std::vector<WeightArgs>> declared_groups(const Snapshot& snap) {
  const std::string at = snap.folder() + "/config.json: quantization_config.config_groups";
  std::vector<WeightArgs> out;
  const json& qc = snap.config().quantization_config;
  auto groups = qc.is_object() ? qc.find("config_groups") : qc.end();
  if (groups == qc.end() || !groups->is_object()) return out;
  for (const auto& [name, g] : groups->items()) {
    auto w = g.is_object() ? g.find("weights") : g.end();
    if (w == g.end() || !w->is_object()) continue;
    auto type = w->find("type");
    if (type == w->end() || !type->is_string() || type->get<std::string>() != "int") continue;
    WeightArgs a;
    a.group_name = name;
    auto bits = w->find("num_bits");
    if (bits == w->end() || !bits->is_number_integer()) return invalid_input(at + "." + name + ".weights.num_bits is not an integer");
    a.bits = int(bits->get<int64_t>());
    if (auto sym = w->find("symmetric"); sym != w->end() && sym->is_boolean()) a.symmetric = sym->get<bool>();
    const std::string strategy = w->value("strategy", std::string("tensor"));
    if (strategy == "channel") {
      a.channel = true;
    } else if (strategy == "group") {
      auto gs = w->find("group_size");
      if (gs == w->end() || !gs->is_number_unsigned() || gs->get<uint64_t>() == 0)
        return invalid_input(at + "." + name + ".weights.group_size is not a positive integer for strategy 'group'");
      a.group_size = gs->get<uint64_t>();
    } else {
      return unsupported(at + "." + name + ".weights.strategy '" + strategy + "': iris reads pack-quantized integers by group or channel");
    }
    if (auto ao = w->find("actorder"); ao != w->end() && ao->is_string()) a.actorder = ao->get<std::string>() == "group" || ao->get<std::string>() == "weight";
    out.push_back(a);
  }
  return out;
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& packed, const std::string& weight, const GroupingOptions& options) {
  if (packed.tensor->dtype == DType::kU8) return compressed_tensors_mxfp4_group(snap, packed, weight, options);
  const std::string base = weight.substr(0, weight.size() - 7);  // P of P.weight
  auto companion = [&](const char* suffix) { return snap.find(base + suffix); };
  const SnapshotTensor* scale = companion(".weight_scale");
  const SnapshotTensor* shape_t = companion(".weight_shape");
  const SnapshotTensor* zero = companion(".weight_zero_point");
  const SnapshotTensor* g_idx = companion(".weight_g_idx");
  if (!scale) return invalid_input(where(packed) + "packed weight without its '" + base + ".weight_scale' companion");
  if (!shape_t) return invalid_input(where(packed) + "packed weight without its '" + base + ".weight_shape' companion");
  const auto& w = *packed.tensor;
  const auto& s = *scale->tensor;
  if (w.dtype != DType::kI32 || w.shape.size() != 2)
    return invalid_input(where(packed) + "packed codes must be a 2-D I32 (integers) or U8 (MXFP4) tensor, not " + std::string(dtype_st_name(w.dtype)) + " " + shape_str(w.shape));
  // The logical shape, [N, K]: K need not fill the last word.
  const auto& st = *shape_t->tensor;
  if ((st.dtype != DType::kI32 && st.dtype != DType::kI64) || st.numel != 2)
    return invalid_input(where(*shape_t) + "must hold the weight's two dimensions as I32 or I64, not " + std::string(dtype_st_name(st.dtype)) + " " +
                         shape_str(st.shape));
  int64_t dims[2];
  {
    auto bytes = shape_t->file->data(st);
    for (int i = 0; i < 2; ++i) {
      if (st.dtype == DType::kI64) {
        std::memcpy(&dims[i], bytes.data() + 8 * i, 8);
      } else {
        int32_t v;
        std::memcpy(&v, bytes.data() + 4 * i, 4);
        dims[i] = v;
      }
    }
  }
  if (dims[0] <= 0 || dims[1] <= 0 || dims[0] >= (int64_t(1) << 40) || dims[1] >= (int64_t(1) << 40))
    return invalid_input(where(*shape_t) + "holds [" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + "], not a matrix's shape");
  auto p = std::make_shared<PackedIntegers>();
  p->packing = IntPacking::kCompressedTensors;
  p->scheme = "compressed-tensors pack-quantized";
  p->n = uint64_t(dims[0]);
  p->k = uint64_t(dims[1]);
  if (w.shape[0] != p->n) return invalid_input(where(packed) + "shape " + shape_str(w.shape) + " has not the " + std::to_string(p->n) + " rows weight_shape says");
  // The bits: the declared width whose words the packed rows have.
  IRIS_ASSIGN_OR_RETURN(std::vector<WeightArgs> declared, declared_groups(snap));
  if (declared.empty()) {
    // No config groups (a lone safetensors file): the width and grouping the shapes imply,
    // symmetric where no zero point is stored. Widths 2, 4 and 8 give distinct word counts
    // for any K > 4. The group: the smallest power of two that makes the scales' columns (the
    // tools' group sizes are), else K / columns where that divides; otherwise refused below.
    for (int bits : {2, 4, 8}) {
      const uint64_t per_word = 32 / uint64_t(bits);
      if ((p->k + per_word - 1) / per_word != w.shape[1] || s.shape.size() != 2 || s.shape[1] == 0 || s.shape[1] > p->k) continue;
      WeightArgs a;
      a.bits = bits;
      a.symmetric = zero == nullptr;
      a.channel = s.shape[1] == 1;
      const uint64_t groups = s.shape[1];
      a.group_size = p->k % groups == 0 ? p->k / groups : 0;
      for (uint64_t size = 1; size <= p->k; size *= 2)
        if ((p->k + size - 1) / size == groups) {
          a.group_size = size;
          break;
        }
      if (a.group_size == 0) break;
      if (a.channel) a.group_size = p->k;
      a.actorder = g_idx != nullptr;
      a.group_name = "(none: inferred from the shapes)";
      declared.push_back(a);
      break;
    }
  }
  const WeightArgs* args = nullptr;
  std::set<int> widths;
  for (const auto& a : declared) {
    widths.insert(a.bits);
    if (32 % a.bits == 0 && (p->k + 32 / a.bits - 1) / (32 / a.bits) == w.shape[1] && (!args || args->bits == a.bits)) {
      // Of the groups of that width, the one whose grouping the scales have.
      const uint64_t groups = a.channel ? 1 : (p->k + a.group_size - 1) / a.group_size;
      if (s.shape.size() == 2 && s.shape[1] == groups) args = &a;
    }
  }
  if (!args) {
    std::string list;
    for (int b : widths) list += (list.empty() ? "" : ", ") + std::to_string(b);
    return invalid_input(where(packed) + "packed " + shape_str(w.shape) + " with scales " + shape_str(s.shape) + " for a " + std::to_string(p->n) + "x" +
                         std::to_string(p->k) + " weight fits no config group's integer width and grouping (declared widths: " +
                         (list.empty() ? std::string("none") : list) + ")");
  }
  p->bits = args->bits;
  p->group = args->channel ? p->k : args->group_size;
  p->groups = (p->k + p->group - 1) / p->group;
  if ((s.dtype != DType::kF16 && s.dtype != DType::kBF16 && s.dtype != DType::kF32) || s.shape != std::vector<uint64_t>{p->n, p->groups})
    return invalid_input(where(*scale) + "scales must be F16, BF16 or F32 [" + std::to_string(p->n) + ", " + std::to_string(p->groups) + "], not " +
                         std::string(dtype_st_name(s.dtype)) + " " + shape_str(s.shape));
  p->scale_dtype = s.dtype;
  const std::string group_text = "config group '" + args->group_name + "'";
  if (zero) {
    if (args->symmetric)
      return invalid_input(where(*zero) + "a zero point for a weight of " + group_text + ", which the config says is symmetric");
    const uint64_t per_word = 32 / uint64_t(p->bits), rows = (p->n + per_word - 1) / per_word;
    const auto& z = *zero->tensor;
    if (z.dtype != DType::kI32 || z.shape != std::vector<uint64_t>{rows, p->groups})
      return invalid_input(where(*zero) + "packed zero points must be I32 [" + std::to_string(rows) + ", " + std::to_string(p->groups) + "], not " +
                           std::string(dtype_st_name(z.dtype)) + " " + shape_str(z.shape));
    p->zeros = *zero;
  } else {
    if (!args->symmetric) return invalid_input(where(packed) + "no '" + base + ".weight_zero_point' for a weight of " + group_text + ", which the config says is asymmetric");
    p->implicit_zero = 1 << (p->bits - 1);  // codes stored offset by 2^(bits-1), the zero point 0
  }
  if (g_idx) {
    IRIS_TRY(check_g_idx_shape(*g_idx, p->k));
    const auto& g = *g_idx->tensor;
    // compressed-tensors initialises g_idx to -1 and ignores the whole tensor (column order)
    // if any entry is still -1; so does this decoder.
    bool unset = false;
    auto bytes = g_idx->file->data(g);
    for (uint64_t c = 0; c < p->k && !unset; ++c) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * c, 4);
      unset = v == -1;
    }
    if (!unset) p->g_idx = *g_idx;
  }
  p->codes = packed;
  p->scales = *scale;
  std::vector<SourcePart> companions = {{Role::kData, *shape_t, std::nullopt, "companion"}};
  if (zero) companions.push_back({Role::kData, *zero, std::nullopt, "zero_points"});
  return packed_integer_tensor(snap, weight, std::move(p), !args->actorder, args->symmetric, options, std::move(companions));
}

std::string group_of(const Snapshot& snap, const std::string& name) {
  if (!name.ends_with(".weight_packed")) return "";
  const std::string base = name.substr(0, name.size() - 14);
  return snap.find(base + ".weight_global_scale") ? "" : base + ".weight";  // with a global scale: NVFP4
}

Status check_unclaimed(const Snapshot& snap, const SnapshotTensor& st, const GroupingOptions&) {
  const std::string& name = st.tensor->name;
  for (const char* suffix : {".weight_zero_point", ".weight_g_idx", ".weight_shape"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string base = name.substr(0, name.size() - std::strlen(suffix));
    if (!snap.find(base + ".weight_packed") && !snap.find(base + ".weight"))
      return invalid_input(where(st) + "a compressed-tensors companion without its '" + base + ".weight_packed'");
  }
  return Status::ok();
}

}  // namespace compressed_tensors_packed

const CheckpointScheme kCompressedTensorsPacked{"compressed-tensors pack-quantized integers", {"compressed-tensors"}, {".weight_packed", ".weight_zero_point"}, true,
                                                compressed_tensors_packed::group_of, compressed_tensors_packed::group,
                                                compressed_tensors_packed::check_unclaimed};

}  // namespace iris::schemes
