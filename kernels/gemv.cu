// Host launcher of the fused dequant-GEMV kernels: y[b, row] = sum_k x[b, k] * W[row, k].
//
// Layouts of 16-row stripes (the default tiles) go to the tensor-core kernel (gemv_mma.cu);
// the CUDA-core kernels below take every other layout and batch, one block per kRowWarps
// rows (row_dot) or per stripe (stripe_dot); the bodies are in gemv_rows.cuh.
#include "kernels/arch.cuh"
#include "kernels/cuda_check.h"
#include "kernels/fp8.cuh"
#include "kernels/gemv_mma.h"
#include "kernels/gemv_rows.cuh"
#include "kernels/tuning.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

using dev::kRowWarps;
using dev::kStripeWarps;

template <typename F, int B, bool OutF32>
__global__ void __launch_bounds__(kRowWarps * 32) gemv_kernel(const QuantView v, const uint16_t* __restrict__ x, void* y) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  const uint64_t row = blockIdx.x * uint64_t(kRowWarps) + (threadIdx.x >> 5);
  if (row >= v.rows) return;
  float acc[B];
  dev::row_dot<F, B>(v, tables, row, x, acc);
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int b = 0; b < B; ++b) dev::store_output<OutF32>(y, b * v.rows + row, acc[b]);
}

template <typename F, int B, bool OutF32>
__global__ void __launch_bounds__(kStripeWarps * 32) gemv_stripe_kernel(const QuantView v, const uint16_t* __restrict__ x, void* y) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  const uint32_t stripes = uint32_t(v.padded_n / v.tile_n);
  const uint64_t b_mat = blockIdx.x / stripes;
  const uint32_t s = blockIdx.x - uint32_t(b_mat) * stripes;
  float acc0[B], acc1[B];
  dev::stripe_dot<F, B>(v, tables, b_mat, s, x, acc0, acc1);
  if ((threadIdx.x & 31) != 0) return;
  const uint32_t warp = threadIdx.x >> 5;
  const uint64_t n0 = uint64_t(s) * v.tile_n + warp, n1 = n0 + kStripeWarps;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    if (warp < v.tile_n && n0 < v.n) dev::store_output<OutF32>(y, b * v.rows + b_mat * v.n + n0, acc0[b]);
    if (warp + kStripeWarps < v.tile_n && n1 < v.n) dev::store_output<OutF32>(y, b * v.rows + b_mat * v.n + n1, acc1[b]);
  }
}

template <typename F, int B>
Status launch_b(const QuantView& v, const uint16_t* x, void* y, bool f32, cudaStream_t s) {
  if (dev::gemv_takes_stripes(v, B)) {
    const unsigned blocks = unsigned((v.rows / v.n) * (v.padded_n / v.tile_n));
    if (f32) gemv_stripe_kernel<F, B, true><<<blocks, kStripeWarps * 32, 0, s>>>(v, x, y);
    else gemv_stripe_kernel<F, B, false><<<blocks, kStripeWarps * 32, 0, s>>>(v, x, y);
    IRIS_CUDA_LAUNCHED("gemv");
    return Status::ok();
  }
  const unsigned blocks = unsigned((v.rows + kRowWarps - 1) / kRowWarps);
  if (f32) gemv_kernel<F, B, true><<<blocks, kRowWarps * 32, 0, s>>>(v, x, y);
  else gemv_kernel<F, B, false><<<blocks, kRowWarps * 32, 0, s>>>(v, x, y);
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
  if (cuda_gemv_uses_tensor_cores(v, batch, c)) return cuda_gemv_mma(v, x, batch, y, f32, stream, c);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, x, batch, y, f32, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, x, batch, y, f32, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, x, batch, y, f32, s);
  }
  return unsupported("gemv: unknown format");
}

bool cuda_gemv_uses_tensor_cores(const QuantView& v, int batch, const LaunchConfig& c) {
  return c.variants.gemv_tensor_cores && c.kernel_arch >= kTensorCoreGemvMinArch && gemv_mma_supports(v, batch);
}

}  // namespace iris
