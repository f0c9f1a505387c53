// The int_group kernels (FORMAT.md 4.5): dequantization and the GEMV, both reading the tiled
// codes at their width (2, 3, 4 or 8 bits), the group scales, zero points and the column
// permutation. Each weight is formats/tensor_decode.cpp's (quant/int_group.h): the integer
// difference times the scale, one FP32 multiplication rounded once to the scale's dtype, a
// NaN the canonical one -- so the dequantization equals the CPU reference bit for bit.
//
// First versions, correct before fast: one thread a weight for dequantization; one warp a
// row for the GEMV (int_group.cuh's int_group_row_dot, which the grouped expert GEMV runs
// too), its lanes striding over the stored columns, each weight decoded as the dequantization
// does and multiplied by the activation of its logical column (the permutation applied to the
// activations, not the weights). No tensor cores yet.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/float_bits.h"
#include "kernels/cuda_check.h"
#include "kernels/int_group.h"
#include "kernels/int_group.cuh"

namespace iris {

namespace {

constexpr int kThreads = 256;

template <int OutKind>  // 0 BF16, 1 F16, 2 F32
__global__ void __launch_bounds__(kThreads) dequant_int_group(const QuantView v, void* out) {
  const uint64_t total = v.rows * v.k, groups = (v.k + v.group_size - 1) / v.group_size;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t row = i / v.k, j = i - row * v.k;
    const float w = dev::int_group_weight(v, row, j, groups);
    const uint64_t col = v.permutation ? v.permutation[(row / v.n) * v.k + j] : j;
    if (col >= v.k) continue;  // (uploads check the permutation; a view made by hand may not)
    const uint64_t o = row * v.k + col;
    if constexpr (OutKind == 0) static_cast<uint16_t*>(out)[o] = f32_to_bf16(w);
    else if constexpr (OutKind == 1) static_cast<uint16_t*>(out)[o] = f32_to_f16(w);
    else static_cast<float*>(out)[o] = w;
  }
}

// One warp a row; batch rows of x (BF16, [batch, k]); y [batch, rows].
__global__ void __launch_bounds__(kThreads) gemv_int_group(const QuantView v, const uint16_t* __restrict__ x, int batch, void* y, bool f32) {
  const uint64_t row = blockIdx.x * uint64_t(kThreads / 32) + (threadIdx.x >> 5);
  if (row >= v.rows) return;
  float acc[16];
  dev::int_group_row_dot(v, row, x, batch, acc);
  if ((threadIdx.x & 31) != 0) return;
  for (int b = 0; b < batch; ++b) {
    if (f32) static_cast<float*>(y)[uint64_t(b) * v.rows + row] = acc[b];
    else static_cast<uint16_t*>(y)[uint64_t(b) * v.rows + row] = f32_to_bf16(acc[b]);
  }
}

unsigned grid_for(uint64_t threads, int sms) {
  const uint64_t blocks = (threads + kThreads - 1) / kThreads;
  return unsigned(std::max<uint64_t>(1, std::min<uint64_t>(blocks, uint64_t(sms > 0 ? sms : 1) * 16)));
}

}  // namespace

Status cuda_int_group_dequantize(const QuantView& v, void* out, DType dt, cudaStream_t s, int sm_count) {
  if (!v.tiled || v.tile_n == 0 || v.tile_k == 0 || v.group_size == 0 || v.code_bits == 0 || v.code_bits > 8)
    return internal_error("int_group dequantize: not a tiled int_group view");
  if (v.rows == 0 || v.k == 0) return Status::ok();
  const unsigned blocks = grid_for(v.rows * v.k, sm_count);
  if (dt == DType::kBF16) dequant_int_group<0><<<blocks, kThreads, 0, s>>>(v, out);
  else if (dt == DType::kF16) dequant_int_group<1><<<blocks, kThreads, 0, s>>>(v, out);
  else dequant_int_group<2><<<blocks, kThreads, 0, s>>>(v, out);
  IRIS_CUDA_LAUNCHED("int_group dequant");
  return Status::ok();
}

Status cuda_int_group_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t s) {
  if (!v.tiled || v.tile_n == 0 || v.tile_k == 0 || v.group_size == 0 || v.code_bits == 0 || v.code_bits > 8)
    return internal_error("int_group gemv: not a tiled int_group view");
  if (batch < 1 || batch > 16) return unsupported("gemv: batch must be 1..16");
  const uint64_t blocks = (v.rows + kThreads / 32 - 1) / (kThreads / 32);
  if (blocks >= (uint64_t(1) << 31)) return unsupported("int_group gemv: too many rows");
  gemv_int_group<<<unsigned(blocks), kThreads, 0, s>>>(v, x, batch, y, f32);
  IRIS_CUDA_LAUNCHED("int_group gemv");
  return Status::ok();
}

}  // namespace iris
