// Device helpers shared by the kernel families: tiled addressing, element decoders by bit
// arithmetic (no local-memory tables), and stores of decoded floats.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/float_bits.h"
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

// OCP E2M1: s ee m, bias 1; exact in FP32.
__device__ __forceinline__ float e2m1(uint32_t c) {
  const uint32_t e = (c >> 1) & 3u, m = c & 1u;
  float mag = e == 0 ? 0.5f * float(m) : __uint_as_float(((e + 126u) << 23) | (m << 22));
  return (c & 8u) ? -mag : mag;
}

// E8M0 scale: 2^(e-127); 0 -> 2^-127 (FP32 subnormal); 0xFF -> NaN (OCP).
__device__ __forceinline__ float e8m0(uint32_t e) {
  if (e == 0xffu) return __uint_as_float(0x7fc00000u);
  return e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23);
}

// E4M3 "fn": bias 7, subnormals, 0x7F/0xFF NaN, no Inf.
__device__ __forceinline__ float e4m3(uint32_t b) {
  const uint32_t s = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);
  if (e == 0) {
    float mag = float(m) * 0.001953125f;  // m * 2^-9, exact
    return __uint_as_float(s | __float_as_uint(mag));
  }
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}

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
