#include "converter/sources/source_tensors.h"

#include "converter/sources/quant_scheme.h"

#include <cstring>
#include <filesystem>
#include <algorithm>
#include <unordered_set>

#include "common/checked_math.h"
#include "formats/iris_archive.h"
#include "formats/json_limits.h"
#include "formats/manifest_entry_text.h"

namespace iris {

using nlohmann::json;

namespace {

const char* const kBnbSuffixes[] = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                                    ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"};

std::string where(const SnapshotTensor& t) { return t.file->path() + ": tensor '" + t.tensor->name + "': "; }

std::string shape_str(const std::vector<uint64_t>& s) { return json(s).dump(); }

bool ends_with(const std::string& s, const std::string& suf) { return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0; }

DType logical_float_dtype(const Snapshot& snap) {
  if (auto d = dtype_from_torch_name(snap.config().torch_dtype)) return *d;
  return DType::kBF16;
}

Result<SourceTensor> group_mxfp4(const Snapshot& snap, const std::string& base, const SnapshotTensor& blocks,
                                 const SnapshotTensor& scales) {
  const auto& b = *blocks.tensor;
  const auto& s = *scales.tensor;
  if (b.dtype != DType::kU8) return invalid_input(where(blocks) + "MXFP4 blocks must be U8, not " + std::string(dtype_st_name(b.dtype)));
  if (s.dtype != DType::kU8 && s.dtype != DType::kF8_E8M0)
    return invalid_input(where(scales) + "MXFP4 scales must be U8 or F8_E8M0, not " + std::string(dtype_st_name(s.dtype)));
  if (b.shape.size() < 3 || b.shape.back() != 16)
    return invalid_input(where(blocks) + "MXFP4 blocks shape " + shape_str(b.shape) + " is not [..., N, K/32, 16]");
  std::vector<uint64_t> expect_scales(b.shape.begin(), b.shape.end() - 1);
  if (s.shape != expect_scales)
    return invalid_input(where(scales) + "shape " + shape_str(s.shape) + " does not match blocks " + shape_str(b.shape) +
                         " (expected " + shape_str(expect_scales) + ")");
  SourceTensor t;
  t.desc.name = base;
  t.desc.shape.assign(b.shape.begin(), b.shape.end() - 2);
  t.desc.shape.push_back(b.shape[b.shape.size() - 2] * 32);
  t.desc.dtype = logical_float_dtype(snap);
  t.desc.format = Format::kMxfp4;
  t.desc.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  t.parts = {{Role::kCodes, blocks}, {Role::kScales, scales}};
  return t;
}

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

}  // namespace

std::optional<DType> dtype_from_torch_name(const std::string& name) {
  std::string n = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  if (n == "bfloat16") return DType::kBF16;
  if (n == "float16" || n == "half") return DType::kF16;
  if (n == "float32" || n == "float") return DType::kF32;
  return std::nullopt;
}

const SourcePart* SourceTensor::part(Role role) const {
  for (const auto& p : parts)
    if (p.role == role) return &p;
  return nullptr;
}

json SourceTensor::source_json() const {
  if (recorded_source) return *recorded_source;
  json parts_j = json::array();
  for (const auto& p : parts)
    parts_j.push_back({{"role", role_name(p.role)},
                       {"name", p.ref.tensor->name},
                       {"file", p.ref.file->file_name()},
                       {"dtype", std::string(dtype_st_name(p.ref.tensor->dtype))},
                       {"shape", p.ref.tensor->shape}});
  return {{"tensors", parts_j}};
}

void SourceTensor::append_source_text(std::string& out, int depth) const {
  if (recorded_source) return append_json_text(out, *recorded_source, depth);
  // source_json()'s keys in the order nlohmann's sorted objects write them.
  JsonMembers record(out, depth, '{');
  record.key("tensors");
  append_json_list(out, parts, record.inner(), [&](const SourcePart& p, int inner) {
    JsonMembers e(out, inner, '{');
    e.key("dtype");
    append_json_string(out, dtype_st_name(p.ref.tensor->dtype));
    e.key("file");
    append_json_string(out, p.ref.file->file_name());
    e.key("name");
    append_json_string(out, p.ref.tensor->name);
    e.key("role");
    append_json_string(out, role_name(p.role));
    e.key("shape");
    append_json_uints(out, p.ref.tensor->shape, e.inner());
    e.close('}');
  });
  record.close('}');
}

std::string quant_method(const Snapshot& snap) {
  const json& qc = snap.config().quantization_config;
  if (!qc.is_object()) return "";
  auto m = qc.find("quant_method");
  return m != qc.end() && m->is_string() ? m->get<std::string>() : "";
}

namespace {

// An archive source's tensors, one each, as the archive stores them (Snapshot::open_archive).
Result<std::vector<SourceTensor>> archive_source_tensors(const Snapshot& snap) {
  std::vector<SourceTensor> out;
  out.reserve(snap.stored_tensors().size());
  std::shared_ptr<const IrisArchive> archive = snap.archive();
  for (const auto& stored : snap.stored_tensors()) {
    SourceTensor t;
    t.desc = stored.desc;
    for (const auto& [role, ref] : stored.components) {
      SourcePart part{role, ref, std::nullopt};
      if (stored.desc.layout.kind == LayoutKind::kTiled && role == Role::kCodes) {
        IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(stored.desc));
        part.tiled = TiledCodes{g, stored.desc.layout};
      }
      t.parts.push_back(std::move(part));
    }
    t.recorded_source = archive->manifest().tensors[stored.index].source.json();
    const size_t index = stored.index;
    t.check = std::make_shared<CheckOnce>([archive, index] { return archive->verify_tensor(archive->manifest().tensors[index]); });
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<std::vector<SourceTensor>> group_source_tensors(const Snapshot& snap, const GroupingOptions& options) {
  if (snap.archive()) return archive_source_tensors(snap);
  // The declared scheme first, then companions that only other schemes write: such a
  // checkpoint is refused by its scheme's name, before a tensor-level symptom is met.
  IRIS_TRY(check_quantization_scheme(snap));
  for (const auto& st : snap.tensors())
    if (std::string scheme = undecodable_scheme_of_companion(snap, st.tensor->name); !scheme.empty())
      return unsupported(where(st) + "a companion of " + scheme + ", a quantization scheme iris does not decode");
  std::unordered_set<std::string> consumed;
  std::vector<SourceTensor> out;
  std::vector<size_t> position;  // of out[i]'s primary tensor in the snapshot
  // Pass 1: find the primary tensor of each quantized group.
  for (size_t i = 0; i < snap.tensors().size(); ++i) {
    const SnapshotTensor& st = snap.tensors()[i];
    const std::string& name = st.tensor->name;
    if (ends_with(name, "_blocks")) {
      std::string base = name.substr(0, name.size() - 7);
      const SnapshotTensor* scales = snap.find(base + "_scales");
      if (!scales) return invalid_input(where(st) + "MXFP4 blocks without their '" + base + "_scales' companion");
      IRIS_ASSIGN_OR_RETURN(SourceTensor t, group_mxfp4(snap, base, st, *scales));
      consumed.insert(name);
      consumed.insert(scales->tensor->name);
      out.push_back(std::move(t));
      position.push_back(i);
    } else if (ends_with(name, ".quant_state.bitsandbytes__nf4") || ends_with(name, ".quant_state.bitsandbytes__fp4")) {
      const bool nf4 = ends_with(name, "__nf4");
      std::string weight_name = name.substr(0, name.size() - std::strlen(".quant_state.bitsandbytes__nf4"));
      const SnapshotTensor* weight = snap.find(weight_name);
      if (!weight) return invalid_input(where(st) + "bitsandbytes quant_state without its weight '" + weight_name + "'");
      if (snap.find(weight_name + (nf4 ? ".quant_state.bitsandbytes__fp4" : ".quant_state.bitsandbytes__nf4")))
        return invalid_input(where(st) + "weight has both an nf4 and an fp4 quant_state");
      IRIS_ASSIGN_OR_RETURN(SourceTensor t, group_bnb(snap, weight_name, *weight, st, nf4));
      for (const auto& p : t.parts) consumed.insert(p.ref.tensor->name);
      out.push_back(std::move(t));
      position.push_back(size_t(weight - snap.tensors().data()));  // its primary tensor: the weight
    } else if (ends_with(name, "_scale_inv") || ends_with(name, ".weight_scale")) {
      const bool inv = ends_with(name, "_scale_inv");
      std::string weight_name = inv ? name.substr(0, name.size() - 10) : name.substr(0, name.size() - 6);
      const SnapshotTensor* weight = snap.find(weight_name);
      if (!weight) return invalid_input(where(st) + "FP8 scale without its weight '" + weight_name + "'");
      if (weight->tensor->dtype != DType::kF8_E4M3)
        return invalid_input(where(*weight) + "has a scale companion '" + name + "' but dtype " +
                             std::string(dtype_st_name(weight->tensor->dtype)) + " (only F8_E4M3 weights are scaled)");
      if (inv && snap.find(weight_name + "_scale"))
        return invalid_input(where(*weight) + "has both weight_scale and weight_scale_inv");
      IRIS_ASSIGN_OR_RETURN(SourceTensor t, group_fp8(snap, *weight, st, inv ? "weight_scale_inv" : "weight_scale"));
      consumed.insert(name);
      consumed.insert(weight_name);
      out.push_back(std::move(t));
      position.push_back(size_t(weight - snap.tensors().data()));
    }
  }
  // Pass 2: companions nobody claimed are orphans; the rest are raw tensors.
  for (size_t i = 0; i < snap.tensors().size(); ++i) {
    const SnapshotTensor& st = snap.tensors()[i];
    const std::string& name = st.tensor->name;
    if (consumed.count(name)) continue;
    if (ends_with(name, "_scales") && snap.find(name.substr(0, name.size() - 7) + "_blocks") == nullptr &&
        st.tensor->dtype == DType::kU8)
      return invalid_input(where(st) + "MXFP4 scales without their '" + name.substr(0, name.size() - 7) + "_blocks' companion");
    for (const char* suf : kBnbSuffixes)
      if (ends_with(name, suf))
        return invalid_input(where(st) + "bitsandbytes companion without a quant_state for its weight");
    const DType dt = st.tensor->dtype;
    if ((dt == DType::kF8_E4M3 || dt == DType::kF8_E5M2) && !options.allow_unscaled_fp8)
      return invalid_input(where(st) + std::string(dtype_st_name(dt)) + " tensor without a '" + name + "_scale_inv' or '" + name +
                           "_scale' companion; storing it raw would assume a scale of 1 (allow that explicitly to keep it raw)");
    if (dt == DType::kU8 && ends_with(name, ".weight") && quant_method(snap) == "bitsandbytes" && st.tensor->shape.size() == 2 &&
        st.tensor->shape.back() == 1)
      return invalid_input(where(st) + "packed bitsandbytes weight without its quant_state companion");
    SourceTensor t;
    t.desc.name = name;
    t.desc.shape = st.tensor->shape;
    t.desc.dtype = st.tensor->dtype;
    t.desc.format = Format::kRaw;
    t.parts = {{Role::kData, st}};
    out.push_back(std::move(t));
    position.push_back(i);
  }
  // Archive order follows the snapshot's (shard, offset) order of each primary tensor, so
  // conversion reads the shards sequentially. (A snapshot of raw tensors only is in that order
  // already: its 10^6 tensors are then not moved into a second list.)
  std::vector<SourceTensor> sorted;
  if (std::is_sorted(position.begin(), position.end())) {
    sorted = std::move(out);
  } else {
    std::vector<std::pair<size_t, size_t>> order(out.size());  // (snapshot position, index in out)
    for (size_t i = 0; i < out.size(); ++i) order[i] = {position[i], i};
    std::sort(order.begin(), order.end());
    sorted.reserve(out.size());
    for (const auto& [pos, i] : order) sorted.push_back(std::move(out[i]));
  }
  for (auto& t : sorted) {
    // Every logical tensor must be one an archive can describe: the grouped shape (K of an
    // MXFP4 stack is 32x its blocks' third dimension) within the format's dimension limit.
    for (uint64_t d : t.desc.shape)
      if (d >= (uint64_t(1) << 48))
        return invalid_input(where(t.parts[0].ref) + "logical shape " + shape_str(t.desc.shape) + " has a dimension of 2^48 or more");
  }
  return sorted;
}

}  // namespace iris
