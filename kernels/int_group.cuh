// int_group on the device (FORMAT.md 4.5): a weight decoded from the tiled codes as the CPU
// reference decodes it (quant/int_group.h), and one output row's dot product with activation
// rows -- the body both the dense GEMV (int_group.cu) and the grouped expert GEMV
// (gemv_experts.cu) run, so that an expert's output from the grouped call equals the dense
// GEMV's on that matrix bit for bit.
#pragma once

#include "common/float_bits.h"
#include "kernels/device_common.cuh"

namespace iris::dev {

// Code j (stored column) of row `row` of the tiled codes.
__device__ __forceinline__ uint32_t int_group_code(const QuantView& v, uint64_t row, uint64_t j) {
  const uint64_t bits = v.code_bits, m = row / v.n, r = row - m * v.n;
  const uint64_t tile_row_bytes = v.tile_k * bits / 8;
  const uint64_t s = r / v.tile_n, rr = r - s * v.tile_n, t = j / v.tile_k, jj = j - t * v.tile_k;
  const uint64_t base = (m * v.padded_n * v.padded_k + s * v.tile_n * v.padded_k) * bits / 8 + (t * v.tile_n + rr) * tile_row_bytes;
  const uint64_t bit = jj * bits;
  const uint8_t* p = v.codes + base + (bit >> 3);
  uint32_t w = p[0];
  if ((bit & 7) + bits > 8) w |= uint32_t(p[1]) << 8;  // a 3-bit code across two bytes (never past its tile row)
  return (w >> (bit & 7)) & ((1u << bits) - 1u);
}

// The weight at stored column j of `row`, as FP32 (a value of the scale's dtype).
__device__ __forceinline__ float int_group_weight(const QuantView& v, uint64_t row, uint64_t j, uint64_t groups) {
  const uint64_t at = row * groups + j / v.group_size;
  float scale;
  if (v.scale_type == ScaleType::kF16) scale = f16_to_f32(static_cast<const uint16_t*>(v.scales)[at]);
  else if (v.scale_type == ScaleType::kBf16) scale = bf16_to_f32(static_cast<const uint16_t*>(v.scales)[at]);
  else scale = static_cast<const float*>(v.scales)[at];
  const int32_t z = v.zero_points ? int32_t(v.zero_points[at]) : int32_t(1u << (v.code_bits - 1));
  // Two roundings where there is a post factor, as bitsandbytes' two torch multiplies; x * 1 is x.
  const float product = __fmul_rn(__fmul_rn(scale, float(int32_t(int_group_code(v, row, j)) - z)), v.post_factor);
  float w = product;
  if (v.scale_type == ScaleType::kF16) w = f16_to_f32(f32_to_f16(product));
  else if (v.scale_type == ScaleType::kBf16) w = bf16_to_f32(f32_to_bf16(product));
  return canonical_nan_if_nan(w);
}

// Row `row` (of all batch * N rows) times `batch` (<= 16) activation rows x[b * v.k ...]: one
// warp, its lanes striding over the stored columns, each weight multiplied by the activation
// of its logical column (the permutation applied to the activations, not the weights), FP32
// accumulation, then a shuffle reduction; every lane ends with the sums.
__device__ __forceinline__ void int_group_row_dot(const QuantView& v, uint64_t row, const uint16_t* __restrict__ x, int batch,
                                                  float (&acc)[16]) {
  const uint64_t groups = (v.k + v.group_size - 1) / v.group_size;
  const int lane = threadIdx.x & 31;
  const uint32_t* perm = v.permutation ? v.permutation + (row / v.n) * v.k : nullptr;
  for (int b = 0; b < 16; ++b) acc[b] = 0.f;
  for (uint64_t j = lane; j < v.k; j += 32) {
    const float w = int_group_weight(v, row, j, groups);
    const uint64_t col = perm ? perm[j] : j;
    if (col >= v.k) continue;  // (uploads check the permutation; a view made by hand may not)
    for (int b = 0; b < batch; ++b) acc[b] = fmaf(w, bf16_to_f32(x[uint64_t(b) * v.k + col]), acc[b]);
  }
  for (int b = 0; b < batch; ++b)
    for (int off = 16; off > 0; off >>= 1) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], off);
}

}  // namespace iris::dev
