// An int_group tensor (FORMAT.md 4.5) written back as the checkpoint it was carried from, byte
// for byte: the packing (GPTQ v1 / v2, AWQ GEMM, compressed-tensors pack-quantized,
// bitsandbytes LLM.int8) comes from
// the source record's tensor names and the embedded config.json; every tensor of the record is
// rebuilt from the archive's components (sources/packed_integers.h says where each packing puts
// a code). What the archive does not hold cannot be rebuilt, and is refused rather than
// guessed: a record naming tensors of another shape or dtype than the packing's.
#include "converter/exports/export_int_group.h"

#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/checked_math.h"
#include "formats/tensor_decode.h"
#include "formats/tile_layout.h"
#include "quant/int_group.h"

namespace iris {

namespace {

using nlohmann::json;

// The int_group tensor's contents, logical column order: codes [n, k] (unsigned, as stored),
// zero points and scales [n, groups], the group of each logical column.
struct Unpacked {
  uint64_t n = 0, k = 0, groups = 0;
  uint32_t bits = 4;
  std::vector<uint8_t> codes;
  std::vector<uint32_t> zeros;
  std::vector<uint8_t> scales;  // [n, groups] of the scale dtype, as stored
  uint64_t scale_bytes = 2;
  std::vector<uint32_t> group_of;
};

// with_codes: also the codes (n * k bytes: done when the tensor that holds them is written,
// so that an export holds one tensor's at a time).
Result<Unpacked> unpack(const IrisArchive& a, const ArchiveTensor& t, bool with_codes) {
  IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(t.desc));
  IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(t.desc));
  const std::string ctx = a.path() + ": tensor '" + t.desc.name + "': ";
  if (g.batch != 1) return unsupported(ctx + "a stack of int_group matrices has no single checkpoint tensor to write back");
  const ComponentBytes c = a.component_bytes(t);
  Unpacked u;
  u.n = g.n, u.k = g.k, u.bits = p.bits, u.groups = ceil_div(g.k, p.group_size);
  u.scale_bytes = dtype_bits(p.scale_dtype) / 8;
  const auto perm_bytes = c[static_cast<int>(Role::kPermutation)];
  if (p.act_order) IRIS_TRY(check_int_group_permutation(t.desc, perm_bytes));
  std::vector<uint32_t> perm(u.k);
  if (p.act_order) std::memcpy(perm.data(), perm_bytes.data(), u.k * 4);
  else std::iota(perm.begin(), perm.end(), 0u);
  // Codes: untiled stripe by stripe, each stored column j put back at logical column perm[j].
  if (with_codes) u.codes.resize(u.n * u.k);
  const auto tiled = c[static_cast<int>(Role::kCodes)];
  std::vector<uint8_t> rows(t.desc.layout.tile_n * g.row_bytes());
  for (uint64_t r0 = 0; with_codes && r0 < u.n; r0 += t.desc.layout.tile_n) {
    untile_stripe(g, t.desc.layout.tile_n, t.desc.layout.tile_k, tiled.data() + (r0 / t.desc.layout.tile_n) * stripe_bytes(g, t.desc.layout.tile_n), r0,
                  rows.data());
    for (uint64_t r = r0; r < std::min(u.n, r0 + t.desc.layout.tile_n); ++r)
      for (uint64_t j = 0; j < u.k; ++j)
        u.codes[r * u.k + perm[j]] = uint8_t(quant::int_group_code(rows.data() + (r - r0) * g.row_bytes(), p.bits, j));
  }
  u.zeros.assign(u.n * u.groups, 1u << (p.bits - 1));
  if (p.zero_points) {
    const auto z = c[static_cast<int>(Role::kZeroPoints)];
    for (uint64_t i = 0; i < u.zeros.size(); ++i) u.zeros[i] = z[i];
  }
  const auto s = c[static_cast<int>(Role::kScales)];
  u.scales.assign(s.begin(), s.end());
  u.group_of.resize(u.k);
  for (uint64_t j = 0; j < u.k; ++j) u.group_of[perm[j]] = uint32_t(j / p.group_size);
  return u;
}

// Packs value v (bits wide) at bit `bit` of a little-endian stream of 32-bit words.
void put_bits(std::vector<uint32_t>& words, uint64_t bit, uint32_t bits, uint32_t v) {
  words[bit / 32] |= v << (bit % 32);
  if (bit % 32 + bits > 32) words[bit / 32 + 1] |= v >> (32 - bit % 32);
}

template <typename T>
std::shared_ptr<const std::vector<uint8_t>> as_bytes(const std::vector<T>& v) {
  auto out = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out->data(), v.data(), out->size());
  return out;
}

enum class Packing { kGptqV1, kGptqV2, kAwq, kCompressedTensors, kBnbInt8 };

// The packed tensors of each packing, by their name's suffix (the record's names).
Result<std::shared_ptr<const std::vector<uint8_t>>> build(Packing k, const std::string& suffix, const Unpacked& u,
                                                          DType dtype) {
  const uint32_t b = u.bits;
  const bool gptq = k == Packing::kGptqV1 || k == Packing::kGptqV2;
  auto transposed_scales = [&] {  // [groups, n], as GPTQ and AWQ store them
    std::vector<uint8_t> out(u.scales.size());
    for (uint64_t r = 0; r < u.n; ++r)
      for (uint64_t g = 0; g < u.groups; ++g)
        std::memcpy(&out[(g * u.n + r) * u.scale_bytes], &u.scales[(r * u.groups + g) * u.scale_bytes], u.scale_bytes);
    return std::make_shared<const std::vector<uint8_t>>(std::move(out));
  };
  auto g_idx = [&] {
    std::vector<int32_t> v(u.group_of.begin(), u.group_of.end());
    return as_bytes(v);
  };
  if (gptq && suffix == ".qweight") {  // [k * b / 32, n]: column n a bit stream along k
    const uint64_t rows = u.k * b / 32;
    std::vector<uint32_t> col(rows + 1), out(rows * u.n);
    for (uint64_t n = 0; n < u.n; ++n) {
      std::fill(col.begin(), col.end(), 0u);
      for (uint64_t kk = 0; kk < u.k; ++kk) put_bits(col, kk * b, b, u.codes[n * u.k + kk]);
      for (uint64_t w = 0; w < rows; ++w) out[w * u.n + n] = col[w];
    }
    return as_bytes(out);
  }
  if (gptq && suffix == ".qzeros") {  // [groups, n * b / 32]: row g a bit stream along n
    const uint64_t cols = ceil_div(u.n * b, 32);
    std::vector<uint32_t> out(u.groups * cols, 0u);
    for (uint64_t g = 0; g < u.groups; ++g) {
      std::vector<uint32_t> row(cols + 1, 0u);
      for (uint64_t n = 0; n < u.n; ++n) {
        uint32_t z = u.zeros[n * u.groups + g];
        if (k == Packing::kGptqV1 && b == 3) z = (z - 1) & 7u;  // v1 at 3 bits: each field zero - 1
        put_bits(row, n * b, b, z);
      }
      // v1 at 2, 4, 8 bits: the whole word less 0x55555555 / 0x11111111 / 0x01010101 (mod 2^32),
      // the inverse of the loader's word-wide addition.
      if (k == Packing::kGptqV1 && b != 3) {
        const uint32_t ones = b == 2 ? 0x55555555u : b == 4 ? 0x11111111u : 0x01010101u;
        for (uint64_t w = 0; w < cols; ++w) row[w] -= ones;
      }
      std::copy(row.begin(), row.begin() + cols, out.begin() + g * cols);
    }
    return as_bytes(out);
  }
  if (k == Packing::kAwq && (suffix == ".qweight" || suffix == ".qzeros")) {  // [rows, n / 8], nibbles of columns 0,2,4,6,1,3,5,7
    static constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const bool weights = suffix == ".qweight";
    const uint64_t rows = weights ? u.k : u.groups;
    std::vector<uint32_t> out(rows * (u.n / 8), 0u);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t w = 0; w < u.n / 8; ++w)
        for (int i = 0; i < 8; ++i) {
          const uint64_t n = 8 * w + kOrder[i];
          const uint32_t v = weights ? u.codes[n * u.k + r] : u.zeros[n * u.groups + r];
          out[r * (u.n / 8) + w] |= v << (4 * i);
        }
    return as_bytes(out);
  }
  if ((gptq || k == Packing::kAwq) && suffix == ".scales") return transposed_scales();
  if (gptq && suffix == ".g_idx") return g_idx();
  if (k == Packing::kCompressedTensors) {
    const uint32_t per = 32 / b;
    if (suffix == ".weight_packed") {  // [n, ceil(k / per)]
      const uint64_t wpr = ceil_div(u.k, per);
      std::vector<uint32_t> out(u.n * wpr, 0u);
      for (uint64_t n = 0; n < u.n; ++n)
        for (uint64_t kk = 0; kk < u.k; ++kk) out[n * wpr + kk / per] |= uint32_t(u.codes[n * u.k + kk]) << (b * (kk % per));
      return as_bytes(out);
    }
    if (suffix == ".weight_zero_point") {  // [ceil(n / per), groups], packed along n
      std::vector<uint32_t> out(ceil_div(u.n, per) * u.groups, 0u);
      for (uint64_t n = 0; n < u.n; ++n)
        for (uint64_t g = 0; g < u.groups; ++g) out[(n / per) * u.groups + g] |= (u.zeros[n * u.groups + g] & ((1u << b) - 1)) << (b * (n % per));
      return as_bytes(out);
    }
    if (suffix == ".weight_scale") return std::make_shared<const std::vector<uint8_t>>(u.scales);
    if (suffix == ".weight_g_idx") return g_idx();
    if (suffix == ".weight_shape") {
      if (dtype == DType::kI64) return as_bytes(std::vector<int64_t>{int64_t(u.n), int64_t(u.k)});
      return as_bytes(std::vector<int32_t>{int32_t(u.n), int32_t(u.k)});
    }
  }
  if (k == Packing::kBnbInt8) {
    if (suffix == ".weight") {  // I8 [n, k]: the signed code, q + 128's byte with its top bit flipped
      std::vector<uint8_t> out(u.codes.size());
      for (uint64_t i = 0; i < out.size(); ++i) out[i] = uint8_t(u.codes[i] ^ 0x80u);
      return std::make_shared<const std::vector<uint8_t>>(std::move(out));
    }
    if (suffix == ".SCB") return std::make_shared<const std::vector<uint8_t>>(u.scales);  // F32 [n]
    if (suffix == ".weight_format") return std::make_shared<const std::vector<uint8_t>>(1, uint8_t(0));  // "row", the only one read
  }
  return unsupported("no rule to rebuild a tensor ending in '" + suffix + "'");
}

// LLM.int8's packing holds what its reader makes of it and nothing else: 8-bit codes offset by
// 128, one F32 scale a row, bitsandbytes' 1/127 after it.
bool llm_int8_shaped(const IntGroupParams& p, uint64_t k) {
  return p.bits == 8 && p.group_size >= k && !p.zero_points && !p.act_order && p.scale_dtype == DType::kF32 &&
         p.post_factor == quant::kLlmInt8PostFactor;
}

// The record's tensor name's suffix after the weight's module: "P.qweight" -> ".qweight".
std::string suffix_of(const std::string& name, const std::string& weight) {
  const std::string base = weight.ends_with(".weight") ? weight.substr(0, weight.size() - 7) : weight;
  return name.starts_with(base) ? name.substr(base.size()) : name;
}

}  // namespace

Status int_group_source_entries(const IrisArchive& a, const ArchiveTensor& t, std::vector<SafetensorsEntry>* out) {
  const std::string ctx = a.path() + ": tensor '" + t.desc.name + "': ";
  const json source = t.source.json();
  auto parts = source.find("tensors");
  if (parts == source.end() || !parts->is_array() || parts->empty())
    return unsupported(ctx + "has no source record, so it cannot be written back in its checkpoint's packing");
  // The packing: the codes' name, and for GPTQ and AWQ the embedded config's quant_method
  // and checkpoint_format (GPTQ v1 stores zero - 1).
  std::string method, format;
  if (auto cfg = a.read_file("config.json"); cfg.is_ok()) {
    const json c = json::parse(*cfg, nullptr, false);
    if (c.is_object() && c.contains("quantization_config") && c["quantization_config"].is_object()) {
      // (The embedded file is untrusted: a member of another type reads as absent, never throws.)
      const json& qc = c["quantization_config"];
      auto text = [&](const char* key) { return qc.contains(key) && qc[key].is_string() ? qc[key].get<std::string>() : std::string(); };
      method = text("quant_method");
      format = text("checkpoint_format");
    }
  }
  Packing k;
  const std::string codes_suffix = suffix_of((*parts)[0].value("name", ""), t.desc.name);
  if (codes_suffix == ".weight_packed") k = Packing::kCompressedTensors;
  else if (codes_suffix == ".qweight" && method == "awq") k = Packing::kAwq;
  else if (codes_suffix == ".qweight" && method == "gptq") k = format == "gptq_v2" ? Packing::kGptqV2 : Packing::kGptqV1;
  else if (codes_suffix == ".weight" && method == "bitsandbytes") k = Packing::kBnbInt8;
  else
    return unsupported(ctx + "its checkpoint's packing cannot be told from its source record and embedded config.json "
                             "(GPTQ, AWQ, compressed-tensors or LLM.int8); export it with --dtype bf16, f16 or f32");
  if (k == Packing::kBnbInt8) {
    IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(t.desc));
    if (!llm_int8_shaped(p, t.desc.shape.back()))
      return unsupported(ctx + "its int_group parameters are not LLM.int8's (8-bit codes, one F32 scale a row, the 1/127 post factor), "
                               "so it cannot be written back as bitsandbytes int8; export it with --dtype bf16, f16 or f32");
  }
  IRIS_TRY(unpack(a, t, false).status());  // the parameters and permutation checked now, before any output
  bool first = true;
  for (const auto& p : *parts) {
    const std::string name = p.value("name", "");
    auto dtype = dtype_from_safetensors(p.value("dtype", ""));
    if (name.empty() || !dtype || !p.contains("shape")) return invalid_input(ctx + "source record entry '" + name + "' is incomplete");
    const std::vector<uint64_t> shape = p["shape"].get<std::vector<uint64_t>>();
    const std::string suffix = suffix_of(name, t.desc.name);
    const auto need = dtype_bytes(*dtype, checked_numel(shape).value_or(0));
    if (!need) return invalid_input(ctx + "source record entry '" + name + "' has an impossible shape");
    const bool hash = first;  // hashed before its first byte is written (export's rule)
    first = false;
    // Built when its turn comes (the writer fails the whole export, writing nothing, on an error).
    ComponentProducer prod = [&a, &t, k, suffix, dtype = *dtype, need = *need, name, ctx, hash](ByteSink& sink) -> Status {
      if (hash)
        if (Status s = a.verify_tensor(t); !s.is_ok()) return verify_failed(s.message() + "; nothing written");
      IRIS_ASSIGN_OR_RETURN(Unpacked u, unpack(a, t, suffix == ".qweight" || suffix == ".weight_packed" || (k == Packing::kBnbInt8 && suffix == ".weight")));
      auto built = build(k, suffix, u, dtype);
      if (!built.is_ok()) return built.status().with_context(ctx);
      const auto& bytes = *built;
      if (bytes->size() != need)
        return invalid_input(ctx + "source record gives '" + name + "' " + std::to_string(need) + " bytes; the archive's values make " +
                             std::to_string(bytes->size()));
      return sink.write({bytes->data(), bytes->size()});
    };
    out->push_back({name, *dtype, shape, std::move(prod)});
  }
  return Status::ok();
}

}  // namespace iris
