// bitsandbytes 4-bit, NF4 or FP4, double-quantized or not (FORMATS.md 3.5): P.weight U8 (the
// packed codes) + P.weight.{absmax, quant_map, nested_absmax, nested_quant_map,
// quant_state.bitsandbytes__nf4|fp4} -> P.weight.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include <cstring>

#include "common/checked_math.h"
#include "formats/json_limits.h"

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace bitsandbytes_4bit {

using nlohmann::json;

const char* const kBnbSuffixes[] = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                                    ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"};
constexpr size_t kStateSuffix = std::char_traits<char>::length(".quant_state.bitsandbytes__nf4");

Result<SourceTensor> group_bnb(const Snapshot& snap, const std::string& weight_name, const SnapshotTensor& weight,
                               const SnapshotTensor& state, bool nf4) {
  (void)snap;
  const std::string sctx = where(state);
  if (state.tensor->dtype != DType::kU8 || state.tensor->shape.size() != 1)
    return invalid_input(sctx + "bitsandbytes quant_state must be a 1-D U8 tensor of JSON bytes");
  auto bytes = state.file->data(*state.tensor);
  IRIS_ASSIGN_OR_RETURN(json qs, parse_untrusted_json({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, sctx + "quant_state"));
  if (!qs.is_object()) return invalid_input(sctx + "quant_state is not a JSON object");
  auto need = [&](const char* key) -> Result<json> {
    auto it = qs.find(key);
    if (it == qs.end()) return invalid_input(sctx + "quant_state lacks '" + key + "'");
    return *it;
  };
  IRIS_ASSIGN_OR_RETURN(json qt, need("quant_type"));
  if (!qt.is_string() || qt.get<std::string>() != (nf4 ? "nf4" : "fp4"))
    return invalid_input(sctx + "quant_type " + qt.dump() + " disagrees with the tensor name");
  IRIS_ASSIGN_OR_RETURN(json bs, need("blocksize"));
  IRIS_ASSIGN_OR_RETURN(json shape_j, need("shape"));
  IRIS_ASSIGN_OR_RETURN(json dtype_j, need("dtype"));
  if (!bs.is_number_unsigned()) return invalid_input(sctx + "blocksize is not an unsigned integer");
  if (!shape_j.is_array() || shape_j.empty() || shape_j.size() > 8) return invalid_input(sctx + "shape is not a list of dims");
  std::vector<uint64_t> shape;
  for (const auto& d : shape_j) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() >= (uint64_t(1) << 48)) return invalid_input(sctx + "shape holds " + d.dump());
    shape.push_back(d.get<uint64_t>());
  }
  auto ldt = dtype_j.is_string() ? dtype_from_torch_name(dtype_j.get<std::string>()) : std::nullopt;
  if (!ldt) return invalid_input(sctx + "dtype " + dtype_j.dump() + " is not a float type");
  const auto checked = checked_numel(shape);
  if (!checked || *checked > (uint64_t(1) << 50)) return invalid_input(sctx + "shape " + shape_str(shape) + " holds more than 2^50 elements");
  const uint64_t numel = *checked;
  const uint64_t block = bs.get<uint64_t>();
  if (block == 0 || (block & (block - 1)) || block > 4096) return invalid_input(sctx + "blocksize " + bs.dump() + " is not a power of two <= 4096");

  SourceTensor t;
  t.desc.name = weight_name;
  t.desc.shape = shape;
  t.desc.dtype = *ldt;
  t.desc.format = nf4 ? Format::kNf4 : Format::kBnbFp4;
  t.desc.params = {{"block_size", block}, {"nibble_order", "high_first"}, {"quant_state_bytes", state.tensor->size}};
  // The packed weight: bnb stores (numel+1)/2 bytes, any shape holding that many (usually [n, 1]).
  const auto& w = *weight.tensor;
  if (w.dtype != DType::kU8 || w.size != ceil_div(numel, 2))
    return invalid_input(where(weight) + "packed 4-bit weight holds " + std::to_string(w.size) + " bytes of " +
                         std::string(dtype_st_name(w.dtype)) + "; quant_state shape " + shape_str(shape) + " needs " +
                         std::to_string(ceil_div(numel, 2)) + " U8 bytes");
  t.parts.push_back({Role::kCodes, weight});
  const uint64_t nabs = ceil_div(numel, block);
  auto comp = [&](const char* suffix) { return snap.find(weight_name + suffix); };
  const SnapshotTensor* absmax = comp(".absmax");
  const SnapshotTensor* qmap = comp(".quant_map");
  const SnapshotTensor* nested_absmax = comp(".nested_absmax");
  const SnapshotTensor* nested_map = comp(".nested_quant_map");
  if (!absmax || !qmap) return invalid_input(sctx + "bitsandbytes weight lacks its .absmax or .quant_map companion");
  auto check = [&](const SnapshotTensor* c, DType dt, uint64_t n) -> Status {
    if (c->tensor->dtype != dt || c->tensor->numel != n)
      return invalid_input(where(*c) + "expected " + std::to_string(n) + " x " + std::string(dtype_st_name(dt)) + ", found " +
                           std::to_string(c->tensor->numel) + " x " + std::string(dtype_st_name(c->tensor->dtype)));
    return Status::ok();
  };
  const bool nested = qs.contains("nested_blocksize") || nested_absmax || nested_map;
  if (nested) {
    if (!nested_absmax || !nested_map) return invalid_input(sctx + "double-quantized weight lacks .nested_absmax or .nested_quant_map");
    IRIS_ASSIGN_OR_RETURN(json nbs, need("nested_blocksize"));
    IRIS_ASSIGN_OR_RETURN(json noff, need("nested_offset"));
    if (!nbs.is_number_unsigned() || nbs.get<uint64_t>() == 0 || nbs.get<uint64_t>() > 65536)
      return invalid_input(sctx + "nested_blocksize " + nbs.dump() + " out of range");
    if (!noff.is_number()) return invalid_input(sctx + "nested_offset is not a number");
    IRIS_TRY(check(absmax, DType::kU8, nabs));
    IRIS_TRY(check(nested_absmax, DType::kF32, ceil_div(nabs, nbs.get<uint64_t>())));
    IRIS_TRY(check(nested_map, DType::kF32, 256));
    // FORMATS.md 3.5: the FP32 offset printed as a double; cast once to float, keep its bits.
    const float off = static_cast<float>(noff.get<double>());
    uint32_t bits;
    std::memcpy(&bits, &off, 4);
    char hex[11];
    std::snprintf(hex, sizeof hex, "0x%08x", bits);
    t.desc.params["double_quant"] = true;
    t.desc.params["nested_block_size"] = nbs.get<uint64_t>();
    t.desc.params["nested_offset"] = double(off);
    t.desc.params["nested_offset_f32_bits"] = hex;
    t.parts.push_back({Role::kAbsmax, *absmax});
    t.parts.push_back({Role::kNestedAbsmax, *nested_absmax});
    t.parts.push_back({Role::kCodeTable, *qmap});
    t.parts.push_back({Role::kNestedCodeTable, *nested_map});
  } else {
    IRIS_TRY(check(absmax, DType::kF32, nabs));
    t.desc.params["double_quant"] = false;
    t.parts.push_back({Role::kAbsmax, *absmax});
    t.parts.push_back({Role::kCodeTable, *qmap});
  }
  IRIS_TRY(check(qmap, DType::kF32, 16));
  t.parts.push_back({Role::kQuantState, state});
  return t;
}

std::string group_of(const Snapshot&, const std::string& name) {
  const bool state = name.ends_with(".quant_state.bitsandbytes__nf4") || name.ends_with(".quant_state.bitsandbytes__fp4");
  return state ? name.substr(0, name.size() - kStateSuffix) : "";
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& state, const std::string& weight_name, const GroupingOptions&) {
  const bool nf4 = state.tensor->name.ends_with("__nf4");
  const SnapshotTensor* weight = snap.find(weight_name);
  if (!weight) return invalid_input(where(state) + "bitsandbytes quant_state without its weight '" + weight_name + "'");
  if (snap.find(weight_name + (nf4 ? ".quant_state.bitsandbytes__fp4" : ".quant_state.bitsandbytes__nf4")))
    return invalid_input(where(state) + "weight has both an nf4 and an fp4 quant_state");
  return group_bnb(snap, weight_name, *weight, state, nf4);
}

Status check_unclaimed(const Snapshot& snap, const SnapshotTensor& st, const GroupingOptions&) {
  const std::string& name = st.tensor->name;
  for (const char* suf : kBnbSuffixes)
    if (name.ends_with(suf)) return invalid_input(where(st) + "bitsandbytes companion without a quant_state for its weight");
  if (st.tensor->dtype == DType::kU8 && name.ends_with(".weight") && quant_method(snap) == "bitsandbytes" && st.tensor->shape.size() == 2 &&
      st.tensor->shape.back() == 1)
    return invalid_input(where(st) + "packed bitsandbytes weight without its quant_state companion");
  return Status::ok();
}

}  // namespace bitsandbytes_4bit

const CheckpointScheme kBitsandbytes4bit{"bitsandbytes 4-bit", {"bitsandbytes"}, {std::begin(bitsandbytes_4bit::kBnbSuffixes), std::end(bitsandbytes_4bit::kBnbSuffixes)},
                                         true, bitsandbytes_4bit::group_of, bitsandbytes_4bit::group, bitsandbytes_4bit::check_unclaimed};

}  // namespace iris::schemes
