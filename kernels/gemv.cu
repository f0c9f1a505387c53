// Host launcher of the fused dequant-GEMV kernels: y[b, row] = sum_k x[b, k] * W[row, k].
//
// v1 (CUDA cores): one warp per output row; lanes stride over the row's 16-byte code units,
// decode them in registers and multiply with every activation row (FP32 accumulation), then
// a warp shuffle reduction. The activations are read through the read-only cache.
#include "kernels/cuda_check.h"
#include "kernels/fp8.cuh"
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

template <typename F, int B>
Status launch_b(const QuantView& v, const uint16_t* x, void* y, bool f32, cudaStream_t s) {
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

Status cuda_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, DType y_dtype, void* stream) {
  if (batch < 1 || batch > 16) return unsupported("gemv: batch must be 1..16");
  if (y_dtype != DType::kBF16 && y_dtype != DType::kF32) return unsupported("gemv: output must be bf16 or f32");
  if (!v.tiled && v.format == ViewFormat::kNf4) return unsupported("gemv: flat NF4 (K not a multiple of the block) has no rows to multiply");
  auto s = static_cast<cudaStream_t>(stream);
  const bool f32 = y_dtype == DType::kF32;
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, x, batch, y, f32, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, x, batch, y, f32, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, x, batch, y, f32, s);
  }
  return unsupported("gemv: unknown format");
}

}  // namespace iris
