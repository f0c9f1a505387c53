// Host launcher of the fused dequant-GEMV kernels: y[b, row] = sum_k x[b, k] * W[row, k].
//
// Layouts of 16-row stripes (the default tiles) go to the tensor-core kernel (gemv_mma.cu);
// the CUDA-core kernels below take every other layout and batch:
//
// v1 (CUDA cores, any tile): one warp per output row; lanes stride over the row's code items,
// decode them in registers and multiply with every activation row (FP32 accumulation), then
// a warp shuffle reduction. The activations are read through the read-only cache.
// v2 (tiles of <= 16 rows): one block per stripe; warp w owns stripe rows w and w + 8, lanes
// read consecutive code words of a tile row (128-byte coalesced loads), loads for kTiles
// tiles are issued before any is decoded, and each activation chunk serves both rows.
#include "kernels/cuda_check.h"
#include "kernels/fp8.cuh"
#include "kernels/gemv_mma.h"
#include "kernels/tuning.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

constexpr int kWarps = 4;

template <typename F, int B, bool OutF32>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const QuantView v, const uint16_t* __restrict__ x, void* y) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const uint64_t row = blockIdx.x * uint64_t(kWarps) + (threadIdx.x >> 5);
  if (row >= v.rows) return;
  float acc[B];
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
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      if constexpr (OutF32) static_cast<float*>(y)[b * v.rows + row] = acc[b];
      else static_cast<uint16_t*>(y)[b * v.rows + row] = iris::f32_to_bf16(acc[b]);
    }
  }
}

constexpr int kStripeWarps = 8;
constexpr int kTiles = 4;

template <typename F, int B, bool OutF32>
__global__ void __launch_bounds__(kStripeWarps * 32) gemv_stripe_kernel(const QuantView v, const uint16_t* __restrict__ x, void* y) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  constexpr uint32_t kItemBytes = F::kItem * F::kBits / 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t ipr = uint32_t(v.tile_k / F::kItem), ipt = ipr * uint32_t(v.tile_n);
  const uint32_t tps = uint32_t(v.padded_k / v.tile_k), stripes = uint32_t(v.padded_n / v.tile_n);
  const uint64_t b_mat = blockIdx.x / stripes;
  const uint32_t s = blockIdx.x - uint32_t(b_mat) * stripes;
  const uint8_t* stripe = v.codes + (b_mat * stripes + s) * uint64_t(tps) * ipt * kItemBytes;
  const uint32_t r0 = warp, r1 = warp + kStripeWarps;
  const bool has0 = r0 < v.tile_n, has1 = r1 < v.tile_n;
  const uint64_t n0 = uint64_t(s) * v.tile_n + r0, n1 = uint64_t(s) * v.tile_n + r1;
  const uint64_t row0 = b_mat * v.n + n0, row1 = b_mat * v.n + n1;
  float acc0[B], acc1[B];
#pragma unroll
  for (int b = 0; b < B; ++b) acc0[b] = acc1[b] = 0.f;
  for (uint32_t c = lane; c < ipr; c += 32) {
    for (uint32_t t0 = 0; t0 < tps; t0 += kTiles) {
      typename F::Word w0[kTiles], w1[kTiles];
#pragma unroll
      for (int u = 0; u < kTiles; ++u) {
        const uint32_t t = t0 + u;
        if (t < tps) {
          const uint8_t* tile = stripe + uint64_t(t) * ipt * kItemBytes;
          if (has0) w0[u] = F::load(v, (tile - v.codes) + uint64_t(r0 * ipr + c) * kItemBytes);
          if (has1) w1[u] = F::load(v, (tile - v.codes) + uint64_t(r1 * ipr + c) * kItemBytes);
        }
      }
#pragma unroll
      for (int u = 0; u < kTiles; ++u) {
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
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      if (has0 && n0 < v.n) {
        if constexpr (OutF32) static_cast<float*>(y)[b * v.rows + row0] = acc0[b];
        else static_cast<uint16_t*>(y)[b * v.rows + row0] = iris::f32_to_bf16(acc0[b]);
      }
      if (has1 && n1 < v.n) {
        if constexpr (OutF32) static_cast<float*>(y)[b * v.rows + row1] = acc1[b];
        else static_cast<uint16_t*>(y)[b * v.rows + row1] = iris::f32_to_bf16(acc1[b]);
      }
    }
  }
}

template <typename F, int B>
Status launch_b(const QuantView& v, const uint16_t* x, void* y, bool f32, cudaStream_t s) {
  if (v.tiled && v.tile_n <= 2 * kStripeWarps && B <= 4) {
    const unsigned blocks = unsigned((v.rows / v.n) * (v.padded_n / v.tile_n));
    if (f32) gemv_stripe_kernel<F, B, true><<<blocks, kStripeWarps * 32, 0, s>>>(v, x, y);
    else gemv_stripe_kernel<F, B, false><<<blocks, kStripeWarps * 32, 0, s>>>(v, x, y);
    IRIS_CUDA_LAUNCHED("gemv");
    return Status::ok();
  }
  const unsigned blocks = unsigned((v.rows + kWarps - 1) / kWarps);
  if (f32) gemv_kernel<F, B, true><<<blocks, kWarps * 32, 0, s>>>(v, x, y);
  else gemv_kernel<F, B, false><<<blocks, kWarps * 32, 0, s>>>(v, x, y);
  IRIS_CUDA_LAUNCHED("gemv");
  return Status::ok();
}

template <typename F>
Status launch(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t s) {
  switch (batch) {
    case 1: return launch_b<F, 1>(v, x, y, f32, s);
    case 2: return launch_b<F, 2>(v, x, y, f32, s);
    case 4: return launch_b<F, 4>(v, x, y, f32, s);
    case 8: return launch_b<F, 8>(v, x, y, f32, s);
    case 16: return launch_b<F, 16>(v, x, y, f32, s);
    default: break;
  }
  // Other batch sizes: the next power of two would read past x; run them one at a time.
  for (int b = 0; b < batch; ++b) {
    void* yb = f32 ? static_cast<void*>(static_cast<float*>(y) + b * v.rows) : static_cast<void*>(static_cast<uint16_t*>(y) + b * v.rows);
    IRIS_TRY((launch_b<F, 1>(v, x + b * v.k, yb, f32, s)));
  }
  return Status::ok();
}

}  // namespace

Status cuda_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, DType y_dtype, void* stream, const LaunchConfig& c) {
  if (c.sm_count <= 0) return invalid_argument("gemv: the launch configuration has no SM count");
  if (batch < 1 || batch > 16) return unsupported("gemv: batch must be 1..16");
  if (y_dtype != DType::kBF16 && y_dtype != DType::kF32) return unsupported("gemv: output must be bf16 or f32");
  if (!v.tiled && v.format == ViewFormat::kNf4) return unsupported("gemv: flat NF4 (K not a multiple of the block) has no rows to multiply");
  auto s = static_cast<cudaStream_t>(stream);
  const bool f32 = y_dtype == DType::kF32;
  // Empty tensors: no rows, nothing to write (and no zero-block launch); K = 0, every output
  // is the empty sum, +0.
  if (v.rows == 0) return Status::ok();
  if (v.k == 0) {
    IRIS_CUDA_TRY(cudaMemsetAsync(y, 0, uint64_t(batch) * v.rows * (f32 ? 4 : 2), s));
    return Status::ok();
  }
  if (cuda_gemv_uses_tensor_cores(v, batch, c.variants)) return cuda_gemv_mma(v, x, batch, y, f32, stream, c);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, x, batch, y, f32, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, x, batch, y, f32, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, x, batch, y, f32, s);
  }
  return unsupported("gemv: unknown format");
}

bool cuda_gemv_uses_tensor_cores(const QuantView& v, int batch, const KernelVariants& variants) {
  return variants.gemv_tensor_cores && gemv_mma_supports(v, batch);
}

}  // namespace iris
