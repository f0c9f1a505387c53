#include "formats/tensor_decode.h"

#include <algorithm>
#include <cstring>

#include "common/float_bits.h"
#include "formats/tile_layout.h"
#include "quant/int_group.h"
#include "quant/mxfp4.h"
#include "quant/nvfp4.h"

namespace iris {

namespace {

template <typename T>
const T* as(const ComponentBytes& c, Role role) {
  const auto& s = c[static_cast<int>(role)];
  return s.empty() ? nullptr : reinterpret_cast<const T*>(s.data());
}

uint64_t out_size(DType d) { return dtype_bits(d) / 8; }

float load_float(DType d, const uint8_t* p) {
  switch (d) {
    case DType::kBF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DType::kF16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
    default: { double v; std::memcpy(&v, p, 8); return float(v); }
  }
}

// FP32 values -> out_dtype, each rounded once (nearest even), as `iris export` writes them.
void store_floats(const float* in, uint64_t n, DType to, uint8_t* out) {
  switch (to) {
    case DType::kBF16:
      for (uint64_t i = 0; i < n; ++i) { uint16_t h = f32_to_bf16(in[i]); std::memcpy(out + 2 * i, &h, 2); }
      break;
    case DType::kF16:
      for (uint64_t i = 0; i < n; ++i) { uint16_t h = f32_to_f16(in[i]); std::memcpy(out + 2 * i, &h, 2); }
      break;
    default: std::memcpy(out, in, n * 4); break;
  }
}

Status decode_raw_rows(const TensorDesc& d, const ComponentBytes& c, uint64_t row0, uint64_t row1, uint64_t k, DType to, uint8_t* out) {
  if (!is_float_dtype(d.dtype)) return unsupported(tensor_context(d) + std::string(dtype_archive_name(d.dtype)) + " is not a float type to convert");
  const auto data = c[static_cast<int>(Role::kData)];
  const uint64_t in_size = dtype_bits(d.dtype) / 8, n = (row1 - row0) * k;
  const uint8_t* src = data.data() + row0 * k * in_size;
  if (d.dtype == to) {
    std::memcpy(out, src, n * in_size);  // bit for bit, NaN payloads included
    return Status::ok();
  }
  constexpr uint64_t kChunk = 1 << 16;
  float buf[kChunk];
  for (uint64_t i = 0; i < n; i += kChunk) {
    const uint64_t m = std::min(kChunk, n - i);
    for (uint64_t j = 0; j < m; ++j) buf[j] = load_float(d.dtype, src + (i + j) * in_size);
    store_floats(buf, m, to, out + i * out_size(to));
  }
  return Status::ok();
}

// Row-major codes of rows [row0, row1) of a tiled tensor, stripe by stripe.
void untile_rows(const TensorDesc& d, const MatrixGeometry& g, std::span<const uint8_t> tiled, uint64_t row0, uint64_t row1,
                 uint8_t* rows_out) {
  const uint64_t tn = d.layout.tile_n, sb = stripe_bytes(g, tn), rb = g.row_bytes();
  std::vector<uint8_t> stripe(tn * rb);
  for (uint64_t row = row0; row < row1;) {
    const uint64_t m = row / g.n, r = row % g.n, s0 = r - r % tn;
    untile_stripe(g, tn, d.layout.tile_k, tiled.data() + m * g.padded_n * g.padded_row_bytes() + (s0 / tn) * sb, s0, stripe.data());
    const uint64_t take = std::min({row1 - row, s0 + tn - r, g.n - r});
    std::memcpy(rows_out + (row - row0) * rb, stripe.data() + (r - s0) * rb, take * rb);
    row += take;
  }
}

// Decodes rows [row0, row1) of a quantized tensor as FP32 into out.
Status decode_quant_rows(const TensorDesc& d, const ComponentBytes& c, uint64_t row0, uint64_t row1, uint64_t k, float* out) {
  const auto codes = c[static_cast<int>(Role::kCodes)];
  std::vector<uint8_t> rows;
  const uint8_t* row_codes = nullptr;
  uint64_t n = 0;
  if (d.layout.kind == LayoutKind::kTiled) {
    IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(d));
    rows.resize((row1 - row0) * g.row_bytes());
    untile_rows(d, g, codes, row0, row1, rows.data());
    row_codes = rows.data();
    n = g.n;
  }
  switch (d.format) {
    case Format::kMxfp4:
      quant::mxfp4_decode(row_codes, as<uint8_t>(c, Role::kScales) + row0 * quant::mxfp4_row_scales(k), row1 - row0, k, out);
      return Status::ok();
    case Format::kNf4:
    case Format::kBnbFp4: {
      IRIS_ASSIGN_OR_RETURN(Bnb4Params p, bnb4_params(d));
      const auto qp = bnb4_decode_params(p, c);
      if (row_codes) quant::bnb4_decode_window(row_codes, row0 * k, row0 * k, row1 * k, qp, out);  // K is even when tiled
      else quant::bnb4_decode_range(codes.data(), row0 * k, row1 * k, qp, out);
      return Status::ok();
    }
    case Format::kFp8E4M3: {
      IRIS_ASSIGN_OR_RETURN(Fp8Params p, fp8_params(d));
      quant::fp8_decode_rows(row_codes, row0, row1, n, k, fp8_decode_scales(p, c[static_cast<int>(Role::kScales)].data()), out);
      return Status::ok();
    }
    case Format::kIntGroup: {
      IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(d));
      const uint64_t groups = ceil_div(k, p.group_size), es = dtype_bits(p.scale_dtype) / 8;
      const uint8_t* perms = as<uint8_t>(c, Role::kPermutation);
      // Checked to be one before any value is placed by it (an archive's bytes are untrusted).
      if (p.act_order) IRIS_TRY(check_int_group_permutation(d, c[static_cast<int>(Role::kPermutation)]));
      // One matrix of the stack at a time: each has its own permutation.
      for (uint64_t row = row0; row < row1;) {
        const uint64_t m = row / n, end = std::min(row1, (m + 1) * n);
        quant::IntGroupStored st{row_codes + (row - row0) * (ceil_div(k, 8) * 8 * p.bits / 8),
                                 ceil_div(k, 8) * 8 * p.bits / 8,
                                 as<uint8_t>(c, Role::kScales) + row * groups * es,
                                 p.zero_points ? as<uint8_t>(c, Role::kZeroPoints) + row * groups : nullptr,
                                 perms ? reinterpret_cast<const uint32_t*>(perms) + m * k : nullptr,
                                 p.bits, end - row, k, p.group_size, groups, p.scale_dtype, p.post_factor};
        quant::int_group_decode_stored(st, out + (row - row0) * k);
        row = end;
      }
      return Status::ok();
    }
    case Format::kNvfp4: {
      IRIS_ASSIGN_OR_RETURN(Nvfp4Params p, nvfp4_params(d));
      const uint8_t* t = as<uint8_t>(c, Role::kTensorScale);
      for (uint64_t row = row0; row < row1;) {  // one matrix (one tensor scale) at a time
        const uint64_t m = row / n, end = std::min(row1, (m + 1) * n);
        float tm;
        std::memcpy(&tm, t + 4 * m, 4);
        quant::nvfp4_decode_rows(row_codes + (row - row0) * quant::nvfp4_row_bytes(k), as<uint8_t>(c, Role::kScales) + row * quant::nvfp4_row_scales(k),
                                 tm, end - row, k, {p.tensor_scale_divides, p.negative_zero}, out + (row - row0) * k);
        row = end;
      }
      return Status::ok();
    }
    case Format::kRaw: break;
  }
  return internal_error(tensor_context(d) + "not a quantized format");
}

}  // namespace

Status check_int_group_permutation(const TensorDesc& d, std::span<const uint8_t> bytes) {
  const uint64_t k = d.shape.empty() ? 0 : d.shape.back();
  if (k == 0) return Status::ok();
  if (bytes.size() % (4 * k) != 0) return invalid_input(tensor_context(d) + "permutation of " + std::to_string(bytes.size()) + " bytes");
  std::vector<uint8_t> seen;
  for (uint64_t m = 0; m < bytes.size() / (4 * k); ++m) {
    seen.assign(k, 0);
    for (uint64_t j = 0; j < k; ++j) {
      uint32_t col;
      std::memcpy(&col, bytes.data() + 4 * (m * k + j), 4);
      if (col >= k || seen[col])
        return invalid_input(tensor_context(d) + "permutation of matrix " + std::to_string(m) + " is not one: place " + std::to_string(j) +
                             " holds column " + std::to_string(col) + (col >= k ? " of " + std::to_string(k) : ", already placed"));
      seen[col] = 1;
    }
  }
  return Status::ok();
}

std::vector<uint8_t> untile_codes(const TensorDesc& d, std::span<const uint8_t> tiled) {
  if (d.layout.kind != LayoutKind::kTiled) return {tiled.begin(), tiled.end()};
  const MatrixGeometry g = matrix_geometry(d).value();
  std::vector<uint8_t> rows(g.batch * g.n * g.row_bytes());
  untile_rows(d, g, tiled, 0, g.batch * g.n, rows.data());
  return rows;
}

quant::Bnb4bitParams bnb4_decode_params(const Bnb4Params& bp, const ComponentBytes& c) {
  quant::Bnb4bitParams p;
  p.block_size = bp.block_size;
  p.code_table = as<float>(c, Role::kCodeTable);
  p.double_quant = bp.double_quant;
  if (p.double_quant) {
    p.absmax_codes = as<uint8_t>(c, Role::kAbsmax);
    p.nested_absmax = as<float>(c, Role::kNestedAbsmax);
    p.nested_map = as<float>(c, Role::kNestedCodeTable);
    p.nested_block_size = bp.nested_block_size;
    p.nested_offset = bp.nested_offset;
  } else {
    p.absmax = as<float>(c, Role::kAbsmax);
  }
  return p;
}

quant::Fp8Scales fp8_decode_scales(const Fp8Params& p, const void* scales) {
  quant::Fp8Scales s;
  s.data = scales;
  s.type = p.scale_dtype == DType::kBF16 ? quant::ScaleType::kBf16 : p.scale_dtype == DType::kF16 ? quant::ScaleType::kF16 : quant::ScaleType::kF32;
  switch (p.granularity) {
    case ScaleGranularity::kTensor: s.granularity = quant::Fp8Granularity::kTensor; break;
    case ScaleGranularity::kChannel: s.granularity = quant::Fp8Granularity::kChannel; break;
    case ScaleGranularity::kBlock:
      s.granularity = quant::Fp8Granularity::kBlock;
      s.block_n = p.block_n;
      s.block_k = p.block_k;
      break;
    case ScaleGranularity::kGroup:
      s.granularity = quant::Fp8Granularity::kGroup;
      s.group = p.group_size;
      break;
  }
  return s;
}

RowView row_view(const TensorDesc& d) {
  RowView v;
  v.k = d.shape.empty() ? 1 : d.shape.back();
  uint64_t numel = 1;
  for (auto s : d.shape) numel *= s;  // validated: below 2^50
  v.rows = v.k ? numel / v.k : 0;
  return v;
}

Status decode_rows(const TensorDesc& d, const ComponentBytes& c, uint64_t row0, uint64_t row1, DType to, void* out) {
  if (to != DType::kF32 && to != DType::kBF16 && to != DType::kF16)
    return invalid_argument(tensor_context(d) + "decode output must be f32, f16 or bf16, not " + std::string(dtype_archive_name(to)));
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(d));
  for (const auto& s : specs)
    if (c[static_cast<int>(s.role)].size() != s.bytes)
      return invalid_input(tensor_context(d) + "component '" + role_name(s.role) + "' missing or of the wrong size");
  const RowView v = row_view(d);
  if (row0 > row1 || row1 > v.rows)
    return invalid_argument(tensor_context(d) + "rows [" + std::to_string(row0) + ", " + std::to_string(row1) + ") outside [0, " +
                            std::to_string(v.rows) + ")");
  if (row0 == row1 || v.k == 0) return Status::ok();
  auto* dst = static_cast<uint8_t*>(out);
  if (!is_quantized(d.format)) return decode_raw_rows(d, c, row0, row1, v.k, to, dst);
  if (to == DType::kF32) return decode_quant_rows(d, c, row0, row1, v.k, static_cast<float*>(out));
  // Narrower outputs: decode a bounded number of rows at a time through an FP32 buffer.
  const uint64_t step = std::max<uint64_t>(1, (uint64_t(4) << 20) / v.k);
  std::vector<float> buf(std::min(step, row1 - row0) * v.k);
  for (uint64_t r = row0; r < row1; r += step) {
    const uint64_t r1 = std::min(row1, r + step);
    IRIS_TRY(decode_quant_rows(d, c, r, r1, v.k, buf.data()));
    store_floats(buf.data(), (r1 - r) * v.k, to, dst + (r - row0) * v.k * out_size(to));
  }
  return Status::ok();
}

Status reference_decode(const TensorDesc& d, const ComponentBytes& c, float* out) {
  const RowView v = row_view(d);
  return decode_rows(d, c, 0, v.rows, DType::kF32, out);
}

}  // namespace iris
