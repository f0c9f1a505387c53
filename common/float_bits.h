// Bit-exact conversions between FP32 and the 16-bit float formats.
//
// Header-only and usable from CUDA device code (IRIS_HD), so the CPU reference codecs and
// the kernels round the same way: BF16 and F16 rounding is round-to-nearest-even, NaN stays
// NaN (quiet), overflow goes to infinity, as torch's `.to(torch.bfloat16)` does.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define IRIS_HD __host__ __device__ __forceinline__
#else
#define IRIS_HD inline
#endif

namespace iris {

IRIS_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

IRIS_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Decoded values that are NaN are returned as this one quiet NaN, on the CPU and the GPU
// alike (hardware and compilers disagree on NaN payloads and signs; iris output does not).
constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;

IRIS_HD float canonical_nan_if_nan(float f) {
  return f != f ? f32_from_bits(kCanonicalNanBits) : f;
}

IRIS_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

IRIS_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, sign kept
  u += 0x7fffu + ((u >> 16) & 1u);                                        // round to nearest even
  return uint16_t(u >> 16);
}

IRIS_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // Subnormal: value = man * 2^-24, exact in FP32.
    float v = float(man) * (1.0f / 16777216.0f);
    return f32_from_bits(sign | f32_bits(v));
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

IRIS_HD uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520 -> Inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): round a * 2^24 to an integer, ties to even.
    if (a < 0x33000000u) return uint16_t(sign);  // below half the smallest subnormal
    uint32_t exp = a >> 23;
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // so that man >> shift is the subnormal mantissa
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t r = a - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

}  // namespace iris
