// Device helpers shared by the kernel families: tiled addressing, element decoders by bit
// arithmetic (no local-memory tables), and stores of decoded floats.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/float_bits.h"
#include "quant/tables.h"
#include "kernels/quant_view.h"

namespace iris::dev {

// Byte offset of element (row, k) in the codes, k a multiple of 16 bytes' worth of elements.
// FORMAT.md section 5; rows are batch*N rows (matrix b = row / n).
__device__ __forceinline__ uint64_t code_offset(const QuantView& v, uint64_t row, uint64_t k, uint32_t bits) {
  if (!v.tiled) return k * bits / 8;
  const uint64_t b = row / v.n, r = row - b * v.n;
  const uint64_t tile_row = v.tile_k * bits / 8;
  return b * v.padded_n * v.padded_k * bits / 8 + (r / v.tile_n) * v.tile_n * v.padded_k * bits / 8 +
         (k / v.tile_k) * v.tile_n * tile_row + (r % v.tile_n) * tile_row + (k % v.tile_k) * bits / 8;
}

// Element decoders: the one definition in quant/tables.h, shared with the CPU codecs.
__device__ __forceinline__ float e2m1(uint32_t c) { return quant::e2m1_to_f32(uint8_t(c)); }
__device__ __forceinline__ float e8m0(uint32_t e) { return quant::e8m0_to_f32(uint8_t(e)); }
__device__ __forceinline__ float e4m3(uint32_t b) { return quant::e4m3_to_f32(uint8_t(b)); }

// x / d with d = 2^shift when shift >= 0 (the usual case: block sizes are powers of two).
__device__ __forceinline__ uint64_t div_by(uint64_t x, uint64_t d, int32_t shift) {
  return shift >= 0 ? x >> shift : x / d;
}


// Stores `count` (<= N) decoded values at dst; full, 16-byte-aligned runs use vector stores.
template <int N>
__device__ __forceinline__ void store_bf16(uint16_t* dst, const float (&v)[N], int count) {
  if (count == N && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 8) {
      uint4 q;
      q.x = uint32_t(iris::f32_to_bf16(v[i + 0])) | (uint32_t(iris::f32_to_bf16(v[i + 1])) << 16);
      q.y = uint32_t(iris::f32_to_bf16(v[i + 2])) | (uint32_t(iris::f32_to_bf16(v[i + 3])) << 16);
      q.z = uint32_t(iris::f32_to_bf16(v[i + 4])) | (uint32_t(iris::f32_to_bf16(v[i + 5])) << 16);
      q.w = uint32_t(iris::f32_to_bf16(v[i + 6])) | (uint32_t(iris::f32_to_bf16(v[i + 7])) << 16);
      *reinterpret_cast<uint4*>(dst + i) = q;
    }
  } else {
    for (int i = 0; i < count; ++i) dst[i] = iris::f32_to_bf16(v[i]);
  }
}

template <int N>
__device__ __forceinline__ void store_f16(uint16_t* dst, const float (&v)[N], int count) {
  for (int i = 0; i < count; ++i) dst[i] = iris::f32_to_f16(v[i]);
}

template <int N>
__device__ __forceinline__ void store_f32(float* dst, const float (&v)[N], int count) {
  if (count == N && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) *reinterpret_cast<float4*>(dst + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else {
    for (int i = 0; i < count; ++i) dst[i] = v[i];
  }
}

}  // namespace iris::dev
