#include "formats/tensor_desc.h"

#include <numeric>

#include "common/checked_math.h"

namespace iris {

using nlohmann::json;

const char* layout_kind_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::kRowMajor: return "row_major";
    case LayoutKind::kTiled: return "tiled";
    case LayoutKind::kFlat: return "flat";
  }
  return "?";
}

std::string tensor_context(const TensorDesc& d) { return "tensor '" + d.name + "': "; }

namespace {

struct Matrix {
  uint64_t batch = 1, n = 1, k = 1;
};

Result<Matrix> as_matrix(const TensorDesc& d) {
  if (d.shape.size() < 2) return invalid_input(tensor_context(d) + "a " + format_name(d.format) + " weight needs rank >= 2 for a tiled layout");
  Matrix m;
  for (size_t i = 0; i + 2 < d.shape.size(); ++i) m.batch *= d.shape[i];
  m.n = d.shape[d.shape.size() - 2];
  m.k = d.shape.back();
  return m;
}

Result<uint64_t> numel_of(const TensorDesc& d) {
  auto n = checked_numel(d.shape);
  if (!n) return invalid_input(tensor_context(d) + "element count overflows");
  // Keep sizes far below 2^64 so every derived product stays exact.
  if (*n > (uint64_t(1) << 50)) return invalid_input(tensor_context(d) + "more than 2^50 elements");
  return *n;
}

// Component shapes here are products of validated dims below 2^50 elements: no overflow.
ComponentSpec spec(Role role, DType dt, std::vector<uint64_t> shape) {
  ComponentSpec c{role, dt, std::move(shape), 0};
  c.bytes = *dtype_bytes(dt, *checked_numel(c.shape));
  return c;
}

// Bits per code: the format's, or an int_group tensor's own `bits` (0 when unreadable: the
// descriptor's checks refuse it first).
uint32_t code_bits(const TensorDesc& d) {
  if (d.format != Format::kIntGroup) return format_traits(d.format).code_bits;
  auto it = d.params.find("bits");
  const bool ok = it != d.params.end() && it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() <= 8;
  return ok ? uint32_t(it->get<int64_t>()) : 0;
}
uint64_t row_unit(const TensorDesc& d) { return format_traits(d.format).row_unit; }
uint8_t pad_byte(Format f) { return format_traits(f).pad_byte; }

Result<MatrixGeometry> geometry_of(const TensorDesc& d) {
  if (d.layout.kind != LayoutKind::kTiled) return invalid_input(tensor_context(d) + "codes are not tiled");
  IRIS_TRY(numel_of(d).status());  // bounds every product of dims below
  IRIS_ASSIGN_OR_RETURN(Matrix m, as_matrix(d));
  const uint64_t tn = d.layout.tile_n, tk = d.layout.tile_k;
  const uint64_t unit = row_unit(d);
  if (tn == 0 || tk == 0 || tn > 4096 || tk > 65536)
    return invalid_input(tensor_context(d) + "tile " + std::to_string(tn) + "x" + std::to_string(tk) + " out of range");
  uint64_t align = std::lcm<uint64_t>(unit, format_block_size(d) ? format_block_size(d) : 1);
  if (code_bits(d) == 0) return invalid_input(tensor_context(d) + "no code width");
  if (code_bits(d) == 4) align = std::lcm<uint64_t>(align, 2);
  if (tk % align != 0)
    return invalid_input(tensor_context(d) + "tile_k " + std::to_string(tk) + " is not a multiple of " + std::to_string(align));
  MatrixGeometry g;
  g.batch = m.batch;
  g.n = m.n;
  g.k = m.k;
  g.stored_k = round_up(m.k, unit);
  g.padded_n = round_up(m.n, tn);
  g.padded_k = round_up(m.k, tk);
  g.code_bits = code_bits(d);
  g.pad_byte = pad_byte(d.format);
  return g;
}

Status check_layout_json_free(const TensorDesc& d, bool tiled_allowed, bool flat_allowed) {
  switch (d.layout.kind) {
    case LayoutKind::kRowMajor:
      if (is_quantized(d.format)) return invalid_input(tensor_context(d) + "quantized codes need a tiled or flat layout");
      return Status::ok();
    case LayoutKind::kTiled:
      if (!tiled_allowed) return invalid_input(tensor_context(d) + "layout 'tiled' is not valid for this tensor");
      return Status::ok();
    case LayoutKind::kFlat:
      if (!flat_allowed) return invalid_input(tensor_context(d) + "layout 'flat' is not valid for this tensor");
      return Status::ok();
  }
  return invalid_input(tensor_context(d) + "unknown layout");
}

Result<ComponentSpec> codes_spec(const TensorDesc& d, uint64_t numel) {
  if (d.layout.kind == LayoutKind::kFlat)
    return spec(Role::kCodes, DType::kU8, {ceil_div(numel * code_bits(d), 8)});
  IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, geometry_of(d));
  std::vector<uint64_t> shape(d.shape.begin(), d.shape.end() - 2);
  shape.push_back(g.padded_n);
  shape.push_back(g.padded_row_bytes());
  return spec(Role::kCodes, DType::kU8, shape);
}

Result<std::vector<ComponentSpec>> mxfp4_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_TRY(mxfp4_params(d).status());
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  std::vector<uint64_t> sshape(d.shape.begin(), d.shape.end());
  sshape.back() = ceil_div(d.shape.back(), 32);
  return std::vector<ComponentSpec>{codes, spec(Role::kScales, DType::kU8, sshape)};
}

Result<std::vector<ComponentSpec>> bnb_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_ASSIGN_OR_RETURN(Bnb4Params p, bnb4_params(d));
  bool tiled_ok = d.shape.size() >= 2 && d.shape.back() % p.block_size == 0;
  IRIS_TRY(check_layout_json_free(d, tiled_ok, true));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  std::vector<ComponentSpec> out{codes};
  const uint64_t nabs = ceil_div(numel, p.block_size);
  if (p.double_quant) {
    out.push_back(spec(Role::kAbsmax, DType::kU8, {nabs}));
    out.push_back(spec(Role::kNestedAbsmax, DType::kF32, {ceil_div(nabs, p.nested_block_size)}));
    out.push_back(spec(Role::kCodeTable, DType::kF32, {16}));
    out.push_back(spec(Role::kNestedCodeTable, DType::kF32, {256}));
  } else {
    out.push_back(spec(Role::kAbsmax, DType::kF32, {nabs}));
    out.push_back(spec(Role::kCodeTable, DType::kF32, {16}));
  }
  if (p.quant_state_bytes) out.push_back(spec(Role::kQuantState, DType::kU8, {p.quant_state_bytes}));
  return out;
}

Result<std::vector<ComponentSpec>> fp8_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_ASSIGN_OR_RETURN(Fp8Params p, fp8_params(d));
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  IRIS_ASSIGN_OR_RETURN(Matrix m, as_matrix(d));
  uint64_t expect = 0;
  switch (p.granularity) {
    case ScaleGranularity::kTensor: expect = m.batch; break;
    case ScaleGranularity::kChannel: expect = m.batch * m.n; break;
    case ScaleGranularity::kBlock: expect = m.batch * ceil_div(m.n, p.block_n) * ceil_div(m.k, p.block_k); break;
    case ScaleGranularity::kGroup: expect = m.batch * m.n * ceil_div(m.k, p.group_size); break;
  }
  auto sn = checked_numel(p.scale_shape);
  if (!sn) return invalid_input(tensor_context(d) + "scale_shape " + nlohmann::json(p.scale_shape).dump() + " overflows (its product passes 2^64)");
  if (*sn != expect)
    return invalid_input(tensor_context(d) + "scale_shape holds " + std::to_string(sn.value_or(0)) + " scales but " +
                         scale_granularity_name(p.granularity) + " granularity needs " + std::to_string(expect));
  return std::vector<ComponentSpec>{codes, spec(Role::kScales, p.scale_dtype, p.scale_shape)};
}

// int_group: codes (tiled), scales [..., N, G] and, as the parameters say, zero points (u8,
// the same shape) and the column permutation (u32 [..., K]).
Result<std::vector<ComponentSpec>> int_group_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(d));
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  std::vector<uint64_t> gshape(d.shape.begin(), d.shape.end());
  gshape.back() = ceil_div(d.shape.back(), p.group_size);
  std::vector<ComponentSpec> out{codes, spec(Role::kScales, p.scale_dtype, gshape)};
  if (p.zero_points) out.push_back(spec(Role::kZeroPoints, DType::kU8, gshape));
  if (p.act_order) {
    std::vector<uint64_t> pshape(d.shape.begin(), d.shape.end() - 2);
    pshape.push_back(d.shape.back());
    out.push_back(spec(Role::kPermutation, DType::kU32, pshape));
  }
  return out;
}

// nvfp4: codes (tiled), E4M3 scales [..., N, ceil(K/16)] and one FP32 tensor scale per matrix,
// stored in the shape the source gave it (tensor_scale_shape).
Result<std::vector<ComponentSpec>> nvfp4_specs(const TensorDesc& d, uint64_t numel) {
  IRIS_ASSIGN_OR_RETURN(Nvfp4Params p, nvfp4_params(d));
  IRIS_TRY(check_layout_json_free(d, true, false));
  IRIS_ASSIGN_OR_RETURN(ComponentSpec codes, codes_spec(d, numel));
  IRIS_ASSIGN_OR_RETURN(Matrix m, as_matrix(d));
  std::vector<uint64_t> sshape(d.shape.begin(), d.shape.end());
  sshape.back() = ceil_div(d.shape.back(), 16);
  auto tn = checked_numel(p.tensor_scale_shape);
  if (!tn || *tn != m.batch)
    return invalid_input(tensor_context(d) + "tensor_scale_shape " + nlohmann::json(p.tensor_scale_shape).dump() + " does not hold one scale for each of its " +
                         std::to_string(m.batch) + " matrices");
  return std::vector<ComponentSpec>{codes, spec(Role::kScales, DType::kU8, sshape), spec(Role::kTensorScale, DType::kF32, p.tensor_scale_shape)};
}

}  // namespace

uint32_t format_block_size(const TensorDesc& d) {
  switch (d.format) {
    case Format::kMxfp4: return 32;
    case Format::kNvfp4: return 16;
    case Format::kNf4:
    case Format::kBnbFp4: {
      auto it = d.params.find("block_size");
      // In-memory JSON holds integers signed, parsed JSON unsigned: accept both.
      const bool ok = it != d.params.end() && it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() <= 4096;
      return ok ? uint32_t(it->get<int64_t>()) : 0;
    }
    default: return 0;
  }
}

Result<std::vector<ComponentSpec>> component_specs(const TensorDesc& d) {
  IRIS_ASSIGN_OR_RETURN(uint64_t numel, numel_of(d));
  switch (d.format) {
    case Format::kRaw: {
      IRIS_TRY(check_layout_json_free(d, false, false));
      auto bytes = dtype_bytes(d.dtype, numel);
      if (!bytes) return invalid_input(tensor_context(d) + "size does not fill whole bytes");
      if (!d.params.empty()) return invalid_input(tensor_context(d) + "an unquantized tensor takes no format parameters");
      return std::vector<ComponentSpec>{{Role::kData, d.dtype, d.shape, *bytes}};
    }
    case Format::kMxfp4: return mxfp4_specs(d, numel);
    case Format::kNf4:
    case Format::kBnbFp4: return bnb_specs(d, numel);
    case Format::kFp8E4M3: return fp8_specs(d, numel);
    case Format::kIntGroup: return int_group_specs(d, numel);
    case Format::kNvfp4: return nvfp4_specs(d, numel);
  }
  return internal_error("unknown format");
}

Result<MatrixGeometry> matrix_geometry(const TensorDesc& d) { return geometry_of(d); }

std::string storage_name(const TensorDesc& d) {
  return is_quantized(d.format) ? std::string(format_name(d.format)) : std::string(dtype_archive_name(d.dtype));
}

Layout choose_layout(const TensorDesc& d, uint64_t tile_n, uint64_t tile_k) {
  if (!is_quantized(d.format)) return {LayoutKind::kRowMajor, 0, 0};
  const bool bnb = d.format == Format::kNf4 || d.format == Format::kBnbFp4;
  if (d.shape.size() < 2 || (bnb && (format_block_size(d) == 0 || d.shape.back() % format_block_size(d) != 0))) return {LayoutKind::kFlat, 0, 0};
  const uint64_t n = d.shape[d.shape.size() - 2], k = d.shape.back();
  // Kernels load 16 bytes per thread: tiles are whole multiples of that (32 4-bit or 16
  // 8-bit elements) as well as of the format's block.
  uint64_t align = std::max<uint64_t>(format_block_size(d), d.format == Format::kFp8E4M3 ? 16 : 32);  // int_group: 32 (12 bytes at 3 bits)
  // Small matrices get smaller tiles rather than mostly padding.
  uint64_t tk = std::min(tile_k, round_up(std::max<uint64_t>(k, 1), align));
  tk = round_up(tk, align);
  // Rows whose length is not a multiple of the tile take the widest of tk, tk / 2, ... (down
  // to kMinTileK) that pads them least: every kernel reads the padding, and gpt-oss's 2880
  // columns are 3072 in 256-wide tiles (6.7% more bytes) but 2944 in 128-wide ones (2.2%).
  for (uint64_t c = tk / 2; c >= std::max(kMinTileK, align) && c % align == 0; c /= 2)
    if (round_up(k, c) < round_up(k, tk)) tk = c;
  uint64_t tn = std::min(tile_n, std::max<uint64_t>(n, 1));
  return {LayoutKind::kTiled, tn, tk};
}

}  // namespace iris
