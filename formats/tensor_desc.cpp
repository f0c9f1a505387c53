#include "formats/tensor_desc.h"

#include <numeric>

#include "common/checked_math.h"

namespace iris {

using nlohmann::json;

const char* format_name(Format f) {
  switch (f) {
    case Format::kRaw: return "raw";
    case Format::kMxfp4: return "mxfp4";
    case Format::kNf4: return "nf4";
    case Format::kBnbFp4: return "bnb_fp4";
    case Format::kFp8E4M3: return "fp8_e4m3";
  }
  return "?";
}

std::optional<Format> format_from_name(const std::string& name) {
  for (Format f : {Format::kMxfp4, Format::kNf4, Format::kBnbFp4, Format::kFp8E4M3})
    if (name == format_name(f)) return f;
  return std::nullopt;
}

const char* layout_kind_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::kRowMajor: return "row_major";
    case LayoutKind::kTiled: return "tiled";
    case LayoutKind::kFlat: return "flat";
  }
  return "?";
}

const char* scale_granularity_name(ScaleGranularity g) {
  switch (g) {
    case ScaleGranularity::kTensor: return "tensor";
    case ScaleGranularity::kChannel: return "channel";
    case ScaleGranularity::kBlock: return "block";
    case ScaleGranularity::kGroup: return "group";
  }
  return "?";
}

namespace {

std::string ctx(const TensorDesc& d) { return "tensor '" + d.name + "': "; }

// Reads an unsigned integer parameter; `def` when absent (nullopt = required).
Result<uint64_t> param_u64(const TensorDesc& d, const char* key, std::optional<uint64_t> def = std::nullopt) {
  auto it = d.params.find(key);
  if (it == d.params.end()) {
    if (def) return *def;
    return invalid_input(ctx(d) + "format parameter '" + key + "' is missing");
  }
  // Integers built in memory are signed in nlohmann::json; parsed ones are unsigned.
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return invalid_input(ctx(d) + "format parameter '" + key + "' is not a non-negative integer");
  return it->get<uint64_t>();
}

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

struct Matrix {
  uint64_t batch = 1, n = 1, k = 1;
};

Result<Matrix> as_matrix(const TensorDesc& d) {
  if (d.shape.size() < 2) return invalid_input(ctx(d) + "a " + format_name(d.format) + " weight needs rank >= 2 for a tiled layout");
  Matrix m;
  for (size_t i = 0; i + 2 < d.shape.size(); ++i) m.batch *= d.shape[i];
  m.n = d.shape[d.shape.size() - 2];
  m.k = d.shape.back();
  return m;
}

Result<uint64_t> numel_of(const TensorDesc& d) {
  auto n = checked_numel(d.shape);
  if (!n) return invalid_input(ctx(d) + "element count overflows");
  // Keep sizes far below 2^64 so every derived product stays exact.
  if (*n > (uint64_t(1) << 50)) return invalid_input(ctx(d) + "more than 2^50 elements");
  return *n;
}

ComponentSpec spec(std::string role, DType dt, std::vector<uint64_t> shape) {
  ComponentSpec c{std::move(role), dt, std::move(shape), 0};
  c.bytes = *dtype_bytes(dt, *checked_numel(c.shape));
  return c;
}

uint32_t code_bits(Format f) { return f == Format::kFp8E4M3 ? 8 : 4; }

// Elements the format packs per row unit: rows are stored at this granularity.
uint64_t row_unit(const TensorDesc& d) {
  switch (d.format) {
    case Format::kMxfp4: return 32;               // whole blocks
    case Format::kNf4: case Format::kBnbFp4: return 2;  // whole bytes (blocks follow rows when tiled)
    default: return 1;
  }
}

uint8_t pad_byte(Format f) {
  // NF4 code 7 is 0.0 (code 0 is -1.0); MXFP4, bnb FP4 and E4M3 code 0 is +0.
  return f == Format::kNf4 ? 0x77 : 0x00;
}

Result<MatrixGeometry> geometry_of(const TensorDesc& d) {
  if (d.layout.kind != LayoutKind::kTiled) return invalid_input(ctx(d) + "codes are not tiled");
  IRIS_ASSIGN_OR_RETURN(Matrix m, as_matrix(d));
  const uint64_t tn = d.layout.tile_n, tk = d.layout.tile_k;
  const uint64_t unit = row_unit(d);
  if (tn == 0 || tk == 0 || tn > 4096 || tk > 65536)
    return invalid_input(ctx(d) + "tile " + std::to_string(tn) + "x" + std::to_string(tk) + " out of range");
  uint64_t align = std::lcm<uint64_t>(unit, format_block_size(d) ? format_block_size(d) : 1);
  if (code_bits(d.format) == 4) align = std::lcm<uint64_t>(align, 2);
  if (tk % align != 0)
    return invalid_input(ctx(d) + "tile_k " + std::to_string(tk) + " is not a multiple of " + std::to_string(align));
  MatrixGeometry g;
  g.batch = m.batch;
  g.n = m.n;
  g.k = m.k;
  g.stored_k = round_up(m.k, unit);
  g.padded_n = round_up(m.n, tn);
  g.padded_k = round_up(m.k, tk);
  g.code_bits = code_bits(d.format);
  g.pad_byte = pad_byte(d.format);
  return g;
}

Status check_layout_json_free(const TensorDesc& d, bool tiled_allowed, bool flat_allowed) {
  switch (d.layout.kind) {
    case LayoutKind::kRowMajor:
      if (is_quantized(d.format)) return invalid_input(ctx(d) + "quantized codes need a tiled or flat layout");
      return Status::ok();
    case LayoutKind::kTiled:
      if (!tiled_allowed) return invalid_input(ctx(d) + "layout 'tiled' is not valid for this tensor");
      return Status::ok();
    case LayoutKind::kFlat:
      if (!flat_allowed) return invalid_input(ctx(d) + "layout 'flat' is not valid for this tensor");
      return Status::ok();
  }
  return invalid_input(ctx(d) + "unknown layout");
}

Result<ComponentSpec> codes_spec(const TensorDesc& d, uint64_t numel) {
  if (d.layout.kind == LayoutKind::kFlat)
    return spec("codes", DType::kU8, {ceil_div(numel * code_bits(d.format), 8)});
  IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, geometry_of(d));
  std::vector<uint64_t> shape(d.shape.begin(), d.shape.end() - 2);
  shape.push_back(g.padded_n);
  shape.push_back(g.padded_row_bytes());
  return spec("codes", DType::kU8, shape);
}

Result<std::vector<ComponentSpec>> mxfp4_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(uint64_t bs, param_u64(d, "block_size", 32));
  if (bs != 32) return invalid_input(ctx(d) + "mxfp4 block_size must be 32");
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  std::vector<uint64_t> sshape(d.shape.begin(), d.shape.end());
  sshape.back() = ceil_div(d.shape.back(), 32);
  return std::vector<ComponentSpec>{codes, spec("scales", DType::kU8, sshape)};
}

Result<std::vector<ComponentSpec>> bnb_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_ASSIGN_OR_RETURN(uint64_t bs, param_u64(d, "block_size", 64));
  if (!is_pow2(bs) || bs < 32 || bs > 4096) return invalid_input(ctx(d) + "block_size " + std::to_string(bs) + " is not a power of two in [32, 4096]");
  bool tiled_ok = d.shape.size() >= 2 && d.shape.back() % bs == 0;
  IRIS_TRY(check_layout_json_free(d, tiled_ok, true));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  std::vector<ComponentSpec> out{codes};
  const uint64_t nabs = ceil_div(numel, bs);
  auto dq = d.params.find("double_quant");
  if (dq == d.params.end() || !dq->is_boolean()) return invalid_input(ctx(d) + "format parameter 'double_quant' must be true or false");
  if (dq->get<bool>()) {
    IRIS_ASSIGN_OR_RETURN(uint64_t nbs, param_u64(d, "nested_block_size", 256));
    if (nbs == 0 || nbs > 65536) return invalid_input(ctx(d) + "nested_block_size out of range");
    auto off = d.params.find("nested_offset");
    if (off == d.params.end() || !off->is_number()) return invalid_input(ctx(d) + "format parameter 'nested_offset' is missing");
    out.push_back(spec("absmax", DType::kU8, {nabs}));
    out.push_back(spec("nested_absmax", DType::kF32, {ceil_div(nabs, nbs)}));
    out.push_back(spec("code_table", DType::kF32, {16}));
    out.push_back(spec("nested_code_table", DType::kF32, {256}));
  } else {
    out.push_back(spec("absmax", DType::kF32, {nabs}));
    out.push_back(spec("code_table", DType::kF32, {16}));
  }
  IRIS_ASSIGN_OR_RETURN(uint64_t qs, param_u64(d, "quant_state_bytes", 0));
  if (qs > (1u << 20)) return invalid_input(ctx(d) + "quant_state_bytes too large");
  if (qs) out.push_back(spec("quant_state", DType::kU8, {qs}));
  return out;
}

Result<std::vector<ComponentSpec>> fp8_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  IRIS_ASSIGN_OR_RETURN(Matrix m, as_matrix(d));
  auto g = d.params.find("scale_granularity");
  if (g == d.params.end() || !g->is_string()) return invalid_input(ctx(d) + "format parameter 'scale_granularity' is missing");
  uint64_t expect;
  std::string gs = g->get<std::string>();
  if (gs == "tensor") {
    expect = m.batch;
  } else if (gs == "channel") {
    expect = m.batch * m.n;
  } else if (gs == "block") {
    IRIS_ASSIGN_OR_RETURN(uint64_t bn, param_u64(d, "block_n"));
    IRIS_ASSIGN_OR_RETURN(uint64_t bk, param_u64(d, "block_k"));
    if (!bn || !bk || bn > 65536 || bk > 65536) return invalid_input(ctx(d) + "FP8 block shape out of range");
    expect = m.batch * ceil_div(m.n, bn) * ceil_div(m.k, bk);
  } else if (gs == "group") {
    IRIS_ASSIGN_OR_RETURN(uint64_t gsz, param_u64(d, "group_size"));
    if (!gsz || gsz > 65536) return invalid_input(ctx(d) + "FP8 group_size out of range");
    expect = m.batch * m.n * ceil_div(m.k, gsz);
  } else {
    return invalid_input(ctx(d) + "unknown scale_granularity '" + gs + "'");
  }
  auto sd = d.params.find("scale_dtype");
  if (sd == d.params.end() || !sd->is_string()) return invalid_input(ctx(d) + "format parameter 'scale_dtype' is missing");
  auto sdt = dtype_from_archive_name(sd->get<std::string>());
  if (!sdt || (*sdt != DType::kF32 && *sdt != DType::kBF16 && *sdt != DType::kF16))
    return invalid_input(ctx(d) + "scale_dtype must be f32, bf16 or f16");
  std::vector<uint64_t> sshape;
  auto ss = d.params.find("scale_shape");
  if (ss != d.params.end()) {
    if (!ss->is_array() || ss->size() > 8) return invalid_input(ctx(d) + "scale_shape is not a short list");
    for (const auto& v : *ss) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) return invalid_input(ctx(d) + "scale_shape holds a non-integer");
      sshape.push_back(v.get<uint64_t>());
    }
  } else {
    sshape = {expect};
  }
  auto sn = checked_numel(sshape);
  if (!sn || *sn != expect)
    return invalid_input(ctx(d) + "scale_shape holds " + std::to_string(sn.value_or(0)) + " scales but " + gs +
                         " granularity needs " + std::to_string(expect));
  return std::vector<ComponentSpec>{codes, spec("scales", *sdt, sshape)};
}

}  // namespace

uint32_t format_block_size(const TensorDesc& d) {
  switch (d.format) {
    case Format::kMxfp4: return 32;
    case Format::kNf4:
    case Format::kBnbFp4: {
      auto it = d.params.find("block_size");
      return it != d.params.end() && it->is_number_integer() && it->get<int64_t>() > 0 ? uint32_t(it->get<uint64_t>()) : 64;
    }
    default: return 0;
  }
}

bool nf4_double_quant(const TensorDesc& d) {
  auto it = d.params.find("double_quant");
  return it != d.params.end() && it->is_boolean() && it->get<bool>();
}

ScaleGranularity fp8_granularity(const TensorDesc& d) {
  auto it = d.params.find("scale_granularity");
  std::string s = it != d.params.end() && it->is_string() ? it->get<std::string>() : "";
  if (s == "channel") return ScaleGranularity::kChannel;
  if (s == "block") return ScaleGranularity::kBlock;
  if (s == "group") return ScaleGranularity::kGroup;
  return ScaleGranularity::kTensor;
}

Result<std::vector<ComponentSpec>> component_specs(const TensorDesc& d) {
  IRIS_ASSIGN_OR_RETURN(uint64_t numel, numel_of(d));
  switch (d.format) {
    case Format::kRaw: {
      IRIS_TRY(check_layout_json_free(d, false, false));
      auto bytes = dtype_bytes(d.dtype, numel);
      if (!bytes) return invalid_input(ctx(d) + "size does not fill whole bytes");
      return std::vector<ComponentSpec>{{"data", d.dtype, d.shape, *bytes}};
    }
    case Format::kMxfp4: return mxfp4_specs(d, numel);
    case Format::kNf4:
    case Format::kBnbFp4: return bnb_specs(d, numel);
    case Format::kFp8E4M3: return fp8_specs(d, numel);
  }
  return internal_error("unknown format");
}

Result<MatrixGeometry> matrix_geometry(const TensorDesc& d) { return geometry_of(d); }

Layout choose_layout(const TensorDesc& d, uint64_t tile_n, uint64_t tile_k) {
  if (!is_quantized(d.format)) return {LayoutKind::kRowMajor, 0, 0};
  const bool bnb = d.format == Format::kNf4 || d.format == Format::kBnbFp4;
  if (d.shape.size() < 2 || (bnb && d.shape.back() % format_block_size(d) != 0)) return {LayoutKind::kFlat, 0, 0};
  const uint64_t n = d.shape[d.shape.size() - 2], k = d.shape.back();
  // Kernels load 16 bytes per thread: tiles are whole multiples of that (32 4-bit or 16
  // 8-bit elements) as well as of the format's block.
  uint64_t align = std::max<uint64_t>(format_block_size(d), d.format == Format::kFp8E4M3 ? 16 : 32);
  // Small matrices get smaller tiles rather than mostly padding.
  uint64_t tk = std::min(tile_k, round_up(std::max<uint64_t>(k, 1), align));
  tk = round_up(tk, align);
  uint64_t tn = std::min(tile_n, std::max<uint64_t>(n, 1));
  return {LayoutKind::kTiled, tn, tk};
}

}  // namespace iris
