// The CUDA-core GEMV kernels and their launch for one format F and batch B: one block per
// kRowWarps rows (row_dot) or per 16-row stripe (stripe_dot); the bodies are in gemv_rows.cuh.
//
// Included only by the generated instance files (kernels/gemv_instance.cu.in: one translation
// unit per format and batch, 15 in all), so that nvcc compiles them in parallel: as one file
// they took 236 s for sm_90a alone on one core, the longest step of the build.
#pragma once

#include "kernels/cuda_check.h"
#include "kernels/gemv_cuda_cores.h"
#include "kernels/gemv_rows.cuh"

namespace iris::detail {

using dev::kRowWarps;
using dev::kStripeWarps;

template <typename F, int B, bool OutF32>
__global__ void __launch_bounds__(kRowWarps * 32) gemv_kernel(const __grid_constant__ QuantView v, const uint16_t* __restrict__ x, void* y) {
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
__global__ void __launch_bounds__(kStripeWarps * 32) gemv_stripe_kernel(const __grid_constant__ QuantView v, const uint16_t* __restrict__ x, void* y) {
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
Status gemv_cuda_cores_launch(const QuantView& v, const uint16_t* x, void* y, bool f32, cudaStream_t s) {
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

}  // namespace iris::detail
