#include "kernels/quant_view.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace iris {

namespace {
int32_t log2_or_minus1(uint64_t v) {
  if (v == 0 || (v & (v - 1))) return -1;
  int32_t s = 0;
  while ((uint64_t(1) << s) < v) ++s;
  return s;
}
}  // namespace

Result<QuantView> make_quant_view(const TensorDesc& d, const DevicePointers& c) {
  const std::string ctx = "tensor '" + d.name + "': ";
  auto get = [&](Role role) { return c[static_cast<int>(role)]; };
  QuantView v{};
  switch (d.format) {
    case Format::kMxfp4: v.format = ViewFormat::kMxfp4; break;
    case Format::kNf4:
    case Format::kBnbFp4: v.format = ViewFormat::kNf4; break;  // one kernel: the 16-value code book is a component
    case Format::kFp8E4M3: v.format = ViewFormat::kFp8; break;
    case Format::kIntGroup: v.format = ViewFormat::kIntGroup; break;
    case Format::kNvfp4: v.format = ViewFormat::kNvfp4; break;
    default: return unsupported(ctx + "no GPU kernel for format " + format_name(d.format));
  }
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(d));
  for (const auto& s : specs)
    if (!get(s.role) && s.role != Role::kQuantState && s.bytes) return internal_error(ctx + "component '" + role_name(s.role) + "' not on the device");
  v.codes = static_cast<const uint8_t*>(get(Role::kCodes));
  v.tiled = d.layout.kind == LayoutKind::kTiled;
  if (v.tiled) {
    IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(d));
    const uint64_t item = v.format == ViewFormat::kFp8 ? 16 : v.format == ViewFormat::kIntGroup ? 8 : 32;
    if (d.layout.tile_k % item != 0)
      return unsupported(ctx + "tile_k " + std::to_string(d.layout.tile_k) + " is not a multiple of " + std::to_string(item) +
                         " elements; the kernels read 16-byte units");
    v.rows = g.batch * g.n;
    v.n = g.n;
    v.k = g.k;
    v.tile_n = d.layout.tile_n;
    v.tile_k = d.layout.tile_k;
    v.padded_n = g.padded_n;
    v.padded_k = g.padded_k;
  } else {
    if (v.format != ViewFormat::kNf4) return unsupported(ctx + "the kernels read " + format_name(d.format) + " codes only tiled");
    uint64_t numel = 1;
    for (auto s : d.shape) numel *= s;
    v.rows = 1;
    v.n = 1;
    v.k = numel;
  }
  if (v.format == ViewFormat::kMxfp4) {
    v.scales = get(Role::kScales);
    v.scale_type = ScaleType::kU8;
  } else if (v.format == ViewFormat::kNvfp4) {
    IRIS_ASSIGN_OR_RETURN(Nvfp4Params p, nvfp4_params(d));
    v.scales = get(Role::kScales);
    v.scale_type = ScaleType::kU8;
    v.tensor_scale = static_cast<const float*>(get(Role::kTensorScale));
    v.nvfp4_divides = p.tensor_scale_divides;
    v.nvfp4_negative_zero = p.negative_zero;
  } else if (v.format == ViewFormat::kIntGroup) {
    IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(d));
    v.code_bits = p.bits;
    v.group_size = p.group_size;
    v.scales = get(Role::kScales);
    v.scale_type = p.scale_dtype == DType::kBF16 ? ScaleType::kBf16 : p.scale_dtype == DType::kF16 ? ScaleType::kF16 : ScaleType::kF32;
    v.zero_points = p.zero_points ? static_cast<const uint8_t*>(get(Role::kZeroPoints)) : nullptr;
    v.permutation = p.act_order ? static_cast<const uint32_t*>(get(Role::kPermutation)) : nullptr;
    v.post_factor = p.post_factor;
  } else if (v.format == ViewFormat::kFp8) {
    IRIS_ASSIGN_OR_RETURN(Fp8Params p, fp8_params(d));
    v.scales = get(Role::kScales);
    v.scale_type = p.scale_dtype == DType::kBF16 ? ScaleType::kBf16 : p.scale_dtype == DType::kF16 ? ScaleType::kF16 : ScaleType::kF32;
    v.granularity = uint32_t(p.granularity);
    v.block_n = p.block_n;
    v.block_k = p.block_k;
    v.group_size = p.group_size;
  } else {
    IRIS_ASSIGN_OR_RETURN(Bnb4Params p, bnb4_params(d));
    v.block_size = uint32_t(p.block_size);
    if (v.block_size % 32 != 0) return unsupported(ctx + "NF4 block_size must be a multiple of 32 for the kernels");
    v.double_quant = p.double_quant;
    v.scales = get(Role::kAbsmax);
    v.scale_type = v.double_quant ? ScaleType::kU8 : ScaleType::kF32;
    v.code_table = static_cast<const float*>(get(Role::kCodeTable));
    if (v.double_quant) {
      v.nested_block_size = uint32_t(p.nested_block_size);
      v.nested_offset = p.nested_offset;
      v.nested_absmax = static_cast<const float*>(get(Role::kNestedAbsmax));
      v.nested_code_table = static_cast<const float*>(get(Role::kNestedCodeTable));
    }
  }
  v.block_shift = log2_or_minus1(v.block_size);
  v.nested_shift = log2_or_minus1(v.nested_block_size);
  v.block_n_shift = log2_or_minus1(v.block_n);
  v.block_k_shift = log2_or_minus1(v.block_k);
  v.group_shift = log2_or_minus1(v.group_size);
  v.single_matrix = v.rows == v.n;
  v.fp8_uniform8 = v.granularity < 2 || (v.granularity == 2 ? v.block_k % 8 == 0 : v.group_size % 8 == 0);
  return v;
}

bool nvfp4_tensor_scales_mma_safe(std::span<const uint8_t> tensor_scales, bool divides) {
  const float lo = divides ? 0x1p-115f : 0x1p-117f, hi = divides ? 0x1p117f : 0x1p115f;
  for (size_t i = 0; i + 4 <= tensor_scales.size(); i += 4) {
    float t;
    std::memcpy(&t, tensor_scales.data() + i, 4);
    const float a = std::fabs(t);
    if (!(a >= lo && a <= hi)) return false;  // (NaN fails both)
  }
  return true;
}

Status cuda_nvfp4_mark_mma_safe(QuantView& v) {
  if (v.format != ViewFormat::kNvfp4 || v.tensor_scale == nullptr) return internal_error("nvfp4 scales: not an nvfp4 view");
  const uint64_t matrices = v.n ? v.rows / v.n : 0;
  std::vector<uint8_t> host(matrices * 4);
  if (!host.empty() && cudaMemcpy(host.data(), v.tensor_scale, host.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
    return internal_error("nvfp4 scales: could not read the tensor scales");
  v.nvfp4_mma_safe = nvfp4_tensor_scales_mma_safe(host, v.nvfp4_divides);
  return Status::ok();
}

uint64_t matrix_code_bytes(const QuantView& v) {
  const uint64_t bits = v.format == ViewFormat::kFp8 ? 8 : v.format == ViewFormat::kIntGroup ? v.code_bits : 4;
  return v.padded_n * v.padded_k * bits / 8;
}
uint64_t mxfp4_matrix_scale_bytes(const QuantView& v) { return v.n * ((v.k + 31) / 32); }

Result<QuantView> matrix_view(const QuantView& s, uint64_t m) {
  if (!s.tiled) return unsupported("matrix view: the codes are not tiled");
  const uint64_t matrices = s.n ? s.rows / s.n : 0;
  if (m >= matrices) return invalid_argument("matrix view: matrix " + std::to_string(m) + " of " + std::to_string(matrices));
  QuantView v = s;
  v.rows = s.n;
  v.single_matrix = true;
  v.codes = s.codes + m * matrix_code_bytes(s);
  auto advance = [](const void* p, uint64_t bytes) { return static_cast<const void*>(static_cast<const uint8_t*>(p) + bytes); };
  const uint64_t scale_bytes = s.scale_type == ScaleType::kU8 ? 1 : s.scale_type == ScaleType::kF32 ? 4 : 2;
  switch (s.format) {
    case ViewFormat::kMxfp4:
      v.scales = advance(s.scales, m * mxfp4_matrix_scale_bytes(s));
      break;
    case ViewFormat::kFp8: {
      uint64_t per = 1;  // scales per matrix
      if (s.granularity == 1) per = s.n;
      if (s.granularity == 2) per = ((s.n + s.block_n - 1) / s.block_n) * ((s.k + s.block_k - 1) / s.block_k);
      if (s.granularity == 3) per = s.n * ((s.k + s.group_size - 1) / s.group_size);
      v.scales = advance(s.scales, m * per * scale_bytes);
      break;
    }
    case ViewFormat::kNvfp4:
      v.scales = advance(s.scales, m * s.n * ((s.k + 15) / 16));
      v.tensor_scale = s.tensor_scale + m;
      break;
    case ViewFormat::kIntGroup: {
      const uint64_t groups = (s.k + s.group_size - 1) / s.group_size;
      v.scales = advance(s.scales, m * s.n * groups * scale_bytes);
      if (s.zero_points) v.zero_points = s.zero_points + m * s.n * groups;
      if (s.permutation) v.permutation = s.permutation + m * s.k;
      break;
    }
    case ViewFormat::kNf4: {
      const uint64_t first_block = m * s.n * s.k / s.block_size;  // tiled NF4: K is a multiple of the block
      v.scales = advance(s.scales, first_block * scale_bytes);
      if (s.absmax_bf16) v.absmax_bf16 = s.absmax_bf16 + first_block;
      if (s.double_quant) {
        if (first_block % s.nested_block_size != 0)
          return unsupported("matrix view: matrix " + std::to_string(m) + " starts inside a nested absmax block");
        v.nested_absmax = s.nested_absmax + first_block / s.nested_block_size;
      }
      break;
    }
  }
  return v;
}

Result<QuantView> row_blocks_view(const QuantView& m, uint64_t rows) {
  if (!m.tiled) return unsupported("row blocks: the codes are not tiled");
  if (m.rows != m.n) return invalid_argument("row blocks: the tensor holds several matrices");
  if (rows == 0 || m.n % rows != 0) return invalid_argument("row blocks: " + std::to_string(rows) + " rows do not divide N = " + std::to_string(m.n));
  if (rows % m.tile_n != 0 || m.padded_n != m.n)
    return invalid_argument("row blocks: " + std::to_string(rows) + " rows are not whole stripes of " + std::to_string(m.tile_n));
  if (m.format == ViewFormat::kFp8 && m.granularity == 2 && rows % m.block_n != 0)
    return invalid_argument("row blocks: " + std::to_string(rows) + " rows cut the FP8 scale blocks of " + std::to_string(m.block_n));
  if (m.format == ViewFormat::kNf4 && (rows * m.k) % m.block_size != 0)
    return invalid_argument("row blocks: " + std::to_string(rows) + " rows cut an NF4 absmax block");
  QuantView v = m;
  v.n = rows;
  v.padded_n = rows;
  v.single_matrix = rows == m.rows;
  return v;
}

}  // namespace iris
