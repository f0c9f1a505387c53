// The two CUDA-core GEMV bodies, shared by the dense launches (gemv.cu) and the grouped
// expert GEMV (gemv_experts.cu), so that both sum in the same order: an expert's output from
// the grouped call equals cuda_gemv's CUDA-core kernel on that matrix, bit for bit.
//
// row_dot (any tile): one warp per output row; lanes stride over the row's code items,
// decode them in registers and multiply with every activation row (FP32 accumulation), then
// a warp shuffle reduction. The activations are read through the read-only cache.
// stripe_dot (tiles of <= 16 rows): one block per stripe; warp w owns stripe rows w and
// w + 8, lanes read consecutive code words of a tile row (128-byte coalesced loads), loads
// for kTiles tiles are issued before any is decoded, and each activation chunk serves both rows.
#pragma once

#include "kernels/device_common.cuh"

namespace iris::dev {

constexpr int kRowWarps = 4;      // warps per block of the row kernels
constexpr int kStripeWarps = 8;   // warps per block of the stripe kernels: 2 rows each
constexpr int kStripeTiles = 4;   // tiles whose code words are loaded before any is decoded

// Row `row` (of all batch*N rows) times B activation rows x[b * v.k ...]; every lane ends
// with the full sums.
template <typename F, int B>
__device__ __forceinline__ void row_dot(const QuantView& v, const float* tables, uint64_t row, const uint16_t* __restrict__ x,
                                        float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int b = 0; b < B; ++b) acc[b] = 0.f;
  const uint64_t items = (v.k + F::kItem - 1) / F::kItem;
  for (uint64_t it = lane; it < items; it += 32) {
    const uint64_t k0 = it * F::kItem;
    float w[F::kItem];
    F::decode(v, tables, row, k0, w);
    const int count = int(min(uint64_t(F::kItem), v.k - k0));
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const uint16_t* xb = x + b * v.k + k0;
      float s = 0.f;
      if (count == F::kItem && (v.k % 8) == 0) {
#pragma unroll
        for (int j = 0; j < F::kItem; j += 8) {
          const uint4 q = __ldg(reinterpret_cast<const uint4*>(xb + j));
          const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            s = fmaf(w[j + 2 * t], __uint_as_float(u[t] << 16), s);
            s = fmaf(w[j + 2 * t + 1], __uint_as_float(u[t] & 0xffff0000u), s);
          }
        }
      } else {
        for (int j = 0; j < count; ++j) s = fmaf(w[j], iris::bf16_to_f32(xb[j]), s);
      }
      acc[b] += s;
    }
  }
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], o);
}

// Rows `warp` and `warp + 8` of stripe `s` of matrix `b_mat` times B activation rows; every
// lane ends with the full sums (zero for rows outside the matrix).
template <typename F, int B>
__device__ __forceinline__ void stripe_dot(const QuantView& v, const float* tables, uint64_t b_mat, uint32_t s,
                                           const uint16_t* __restrict__ x, float (&acc0)[B], float (&acc1)[B]) {
  constexpr uint32_t kItemBytes = F::kItem * F::kBits / 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t ipr = uint32_t(v.tile_k / F::kItem), ipt = ipr * uint32_t(v.tile_n);
  const uint32_t tps = uint32_t(v.padded_k / v.tile_k), stripes = uint32_t(v.padded_n / v.tile_n);
  const uint8_t* stripe = v.codes + (b_mat * stripes + s) * uint64_t(tps) * ipt * kItemBytes;
  const uint32_t r0 = warp, r1 = warp + kStripeWarps;
  const bool has0 = r0 < v.tile_n, has1 = r1 < v.tile_n;
  const uint64_t n0 = uint64_t(s) * v.tile_n + r0, n1 = uint64_t(s) * v.tile_n + r1;
  const uint64_t row0 = b_mat * v.n + n0, row1 = b_mat * v.n + n1;
#pragma unroll
  for (int b = 0; b < B; ++b) acc0[b] = acc1[b] = 0.f;
  for (uint32_t c = lane; c < ipr; c += 32) {
    for (uint32_t t0 = 0; t0 < tps; t0 += kStripeTiles) {
      typename F::Word w0[kStripeTiles], w1[kStripeTiles];
#pragma unroll
      for (int u = 0; u < kStripeTiles; ++u) {
        const uint32_t t = t0 + u;
        if (t < tps) {
          const uint8_t* tile = stripe + uint64_t(t) * ipt * kItemBytes;
          if (has0) w0[u] = F::load(v, (tile - v.codes) + uint64_t(r0 * ipr + c) * kItemBytes);
          if (has1) w1[u] = F::load(v, (tile - v.codes) + uint64_t(r1 * ipr + c) * kItemBytes);
        }
      }
#pragma unroll
      for (int u = 0; u < kStripeTiles; ++u) {
        const uint32_t t = t0 + u;
        const uint64_t k0 = uint64_t(t) * v.tile_k + uint64_t(c) * F::kItem;
        if (t >= tps || k0 >= v.k) continue;
        float wa[F::kItem], wb[F::kItem];
        const bool ok0 = has0 && n0 < v.n, ok1 = has1 && n1 < v.n;
        if (ok0) F::decode_word(v, tables, row0, k0, w0[u], wa);
        if (ok1) F::decode_word(v, tables, row1, k0, w1[u], wb);
        const int count = int(min(uint64_t(F::kItem), v.k - k0));
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const uint16_t* xb = x + b * v.k + k0;
          float xv[F::kItem];
          if (count == F::kItem && (v.k % 8) == 0) {
            const uint4 q = __ldg(reinterpret_cast<const uint4*>(xb));
            const uint32_t qq[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              xv[2 * j] = __uint_as_float(qq[j] << 16);
              xv[2 * j + 1] = __uint_as_float(qq[j] & 0xffff0000u);
            }
          } else {
#pragma unroll
            for (int j = 0; j < F::kItem; ++j) xv[j] = j < count ? iris::bf16_to_f32(xb[j]) : 0.f;
          }
          float s0 = 0.f, s1 = 0.f;
#pragma unroll
          for (int j = 0; j < F::kItem; ++j) {
            if (j < count) {
              if (ok0) s0 = fmaf(wa[j], xv[j], s0);
              if (ok1) s1 = fmaf(wb[j], xv[j], s1);
            }
          }
          acc0[b] += s0;
          acc1[b] += s1;
        }
      }
    }
  }
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0[b] += __shfl_xor_sync(0xffffffffu, acc0[b], o);
      acc1[b] += __shfl_xor_sync(0xffffffffu, acc1[b], o);
    }
}

// Whether stripe_dot takes this view (otherwise row_dot does).
inline __host__ __device__ bool gemv_takes_stripes(const QuantView& v, int batch) {
  return v.tiled && v.tile_n <= 2 * kStripeWarps && batch <= 4;
}

template <bool OutF32>
__device__ __forceinline__ void store_output(void* y, uint64_t index, float value) {
  if constexpr (OutF32) static_cast<float*>(y)[index] = value;
  else static_cast<uint16_t*>(y)[index] = iris::f32_to_bf16(value);
}

}  // namespace iris::dev
