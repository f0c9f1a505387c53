// Two elements per instruction: decoding 4- and 8-bit codes straight into packed BF16 pairs
// (bf16x2, element 2j in the low half), for the BF16 dequant fast path and the tensor-core
// GEMV. Each helper says why its result is bit-identical to the FP32 reference of
// FORMAT.md section 6 rounded once to BF16; tests/kernels checks that on every code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/float_bits.h"
#include "kernels/arch.cuh"

namespace iris::dev {

// PRMT (generic mode): output byte i = byte (selector nibble i & 7) of {a, b}; a selector
// nibble with bit 3 set replicates that byte's sign bit instead (0x00 for a byte < 0x80).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Two FP32 values rounded to nearest even into one bf16x2 (lo in the low half). NaN inputs
// are not canonicalised here: callers route NaN-producing inputs to the scalar path.
// Before sm_80 (no cvt.bf16x2): the same rounding in integer arithmetic.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if IRIS_ARCH_BF16_CVT
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return uint32_t(iris::f32_to_bf16(lo)) | (uint32_t(iris::f32_to_bf16(hi)) << 16);
#endif
}

// a * b per BF16 half, rounded once (RNE). sm_90: mul.rn.bf16x2; sm_80..89: fma.rn.bf16x2
// with a -0 addend, which rounds the same product once (x + -0 = x for every x, +0 and -0
// included); sm_75 (no BF16 arithmetic): the FP32 product rounded to BF16, which is the same
// whenever the product is exact in FP32 -- true for every caller here (an E2M1 value, two
// significant bits, times a power of two).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
#if IRIS_ARCH_BF16_MUL
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#elif IRIS_ARCH_BF16_FMA
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
#else
  const float lo = __fmul_rn(__uint_as_float(a << 16), __uint_as_float(b << 16));
  const float hi = __fmul_rn(__uint_as_float(a & 0xffff0000u), __uint_as_float(b & 0xffff0000u));
  return pack_bf16x2(lo, hi);
#endif
}

// E2M1 codes -> bf16x2 holding e2m1(code) * 2^-126, exactly: the code's three magnitude
// bits land on the low two exponent bits and the top mantissa bit of a BF16, so BF16's bias
// (127) replaces E2M1's (1); code 1 (0.5) lands on the BF16 subnormal 2^-127, codes 0 and 8
// on +0 and -0. `lo4` / `hi4` hold the even / odd elements' nibbles in bytes 0..3
// (w & 0x0F0F0F0F and (w >> 4) & 0x0F0F0F0F); j picks the byte.
template <int J>
__device__ __forceinline__ uint32_t e2m1_pair_scaled(uint32_t lo4, uint32_t hi4) {
  // bytes [lo4.J, 0x00, hi4.J, 0x00]: nibbles at bits 0..3 and 16..19
  const uint32_t p = prmt(lo4, hi4, uint32_t(J) | 0x80u | (uint32_t(4 + J) << 8) | 0x8000u);
  // (p << 6) | (p << 12) in one multiply (the two shifted copies do not overlap), then keep
  // magnitude bits 6..8 / 22..24 and sign bits 15 / 31.
  return (p * 0x1040u) & 0x81C081C0u;
}

// E8M0 scale byte e as the BF16 factors that turn e2m1 * 2^-126 into e2m1 * 2^(e-127):
// one factor 2^(e-1) when that is a normal BF16 (e <= 128), else 2^126 then 2^(e-127).
// Each multiplication is exact (one significant bit times a power of two, BF16 keeping FP32's
// exponent range), so the product equals the FP32 reference, overflow to infinity included.
struct E8m0Factors {
  uint32_t first, second;  // bf16x2 splats; second == 0 when one factor suffices
};

__device__ __forceinline__ E8m0Factors e8m0_factors(uint32_t e) {
  E8m0Factors f;
  if (e <= 128u) {
    const uint32_t b = (e + 126u) << 7;
    f.first = b | (b << 16);
    f.second = 0;
  } else {
    f.first = 0x7E807E80u;  // 2^126
    const uint32_t b = e << 7;  // 2^(e-127), e in 129..254 (255 is handled by the caller)
    f.second = b | (b << 16);
  }
  return f;
}

__device__ __forceinline__ uint32_t apply_e8m0(uint32_t pair, const E8m0Factors& f) {
  uint32_t r = mul_bf16x2(pair, f.first);
  if (f.second) r = mul_bf16x2(r, f.second);
  return r;
}

// Eight E2M1 codes (one 32-bit word, element 2j in the low nibble of byte j) times the
// scale whose factors are f, as four bf16x2: the BF16 rounding of the FP32 reference, bit
// for bit. Callers handle scale 0xFF (NaN) and build f once per scale, outside: done per
// word, that check cost the GEMV 4-9% (run v17).
__device__ __forceinline__ void e2m1_word_to_bf16x4(uint32_t w, const E8m0Factors& f, uint32_t* out) {
  const uint32_t lo4 = w & 0x0F0F0F0Fu, hi4 = (w >> 4) & 0x0F0F0F0Fu;
  out[0] = apply_e8m0(e2m1_pair_scaled<0>(lo4, hi4), f);
  out[1] = apply_e8m0(e2m1_pair_scaled<1>(lo4, hi4), f);
  out[2] = apply_e8m0(e2m1_pair_scaled<2>(lo4, hi4), f);
  out[3] = apply_e8m0(e2m1_pair_scaled<3>(lo4, hi4), f);
}

// The canonical NaN (0x7FC0) as a bf16x2: every element of a block whose E8M0 scale is 0xFF.
constexpr uint32_t kBf16x2CanonicalNan = 0x7FC07FC0u;

// One E4M3 code (bits 0..7) as its exact FP32 value by bit arithmetic: normals move their
// exponent and mantissa into place and rebias (+120); subnormals (exponent 0) are m * 2^-9,
// exact in FP32. NaN codes (0x7F, 0xFF) come out NaN.
__device__ __forceinline__ float e4m3_to_f32_bits(uint32_t b) {
  const uint32_t s = (b & 0x80u) << 24, em = b & 0x7fu;
  const float normal = __uint_as_float(s | ((em << 20) + (120u << 23)));
  const float sub = __uint_as_float(s | __float_as_uint(float(em) * 0.001953125f));
  const float v = em < 8u ? sub : normal;
  return em == 0x7fu ? __uint_as_float(0x7fc00000u) : v;
}

// Two E4M3 codes (bits 0..7 and 8..15 of `pair`) as two exact FP32 values. sm_89 and newer:
// the hardware E4M3 -> F16 conversion (exact: every E4M3 value is a normal F16 or zero) and
// F16 -> F32; before sm_89 (no E4M3 conversion): bit arithmetic. NaN codes come out NaN (not
// canonical): callers check e4m3_nan_bytes first.
__device__ __forceinline__ void e4m3x2_to_f32(uint32_t pair, float& lo, float& hi) {
#if !IRIS_ARCH_E4M3_CVT
  lo = e4m3_to_f32_bits(pair & 0xffu);
  hi = e4m3_to_f32_bits((pair >> 8) & 0xffu);
#else
  asm("{\n\t.reg .b16 p, l, h;\n\t.reg .b32 f;\n\t"
      "cvt.u16.u32 p, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 f, p;\n\t"
      "mov.b32 {l, h}, f;\n\t"
      "cvt.f32.f16 %0, l;\n\t"
      "cvt.f32.f16 %1, h;\n\t}"
      : "=f"(lo), "=f"(hi)
      : "r"(pair));
#endif
}

// Per byte of w: 0x80 where the byte is an E4M3 NaN (0x7F or 0xFF), else 0.
__device__ __forceinline__ uint32_t e4m3_nan_bytes(uint32_t w) {
  return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
}

}  // namespace iris::dev
