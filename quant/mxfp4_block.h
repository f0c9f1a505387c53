// One block of the fast MXFP4 encoders (mxfp4_encode.cpp, mxfp4_encode_sums.cpp): the shared
// exponent from the block's amax (with the search rule's comparison), its codes and the
// values they decode to. Internal to
// quant/*.cpp; the definitions are in mxfp4.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quant/mxfp4.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant::detail {

// floor(log2 |x|) from the bits of |x| (finite, non-zero), subnormals included.
IRIS_INLINE int floor_log2_bits(uint32_t a) {
  if (a >= 0x00800000u) return int(a >> 23) - 127;
  return (31 - __builtin_clz(a)) - 149;  // subnormal: a * 2^-149, leading bit position
}

// 2^e for e in [-126, 127]: a normal FP32 value.
IRIS_INLINE float pow2f(int e) { return f32_from_bits(uint32_t(e + 127) << 23); }

// |y| rounded to the E2M1 grid (nearest even, saturating at 6) for a = |y|: the grid steps
// whose midpoints a passes, summed (exactly: multiples of 0.5), with e2m1_encode's comparisons.
IRIS_INLINE float e2m1_round_magnitude(float a) {
  return 0.5f * (float(a > 0.25f) + float(a >= 0.75f) + float(a > 1.25f) + float(a >= 1.75f)) + float(a > 2.5f) +
         float(a >= 3.5f) + 2.0f * float(a > 5.0f);
}

// S(e + 1) < S(e) for the search rule (definition in mxfp4.h). The differences are taken
// on magnitudes: e2m1(code(y)) - y = sign(y) * (round(|y|) - |y|), the same square.
template <typename T>
IRIS_INLINE bool plus_one_is_better(const T* v, int e) {
  const float inv = pow2f(-e), inv1 = pow2f(-e - 1);
  double sq0[32], sq1[32];
  for (int i = 0; i < 32; ++i) {
    const float a = f32_from_bits(f32_bits(detail::load_f32(v[i])) & 0x7fffffffu);
    const float y = a * inv, y1 = a * inv1;  // exact scalings of |v|
    // Exact in FP32 (|d| <= |y| and d is a multiple of ulp(y)), so the same as in double.
    const double d0 = double(e2m1_round_magnitude(y) - y);
    const double d1 = double(2.0f * e2m1_round_magnitude(y1) - y);
    sq0[i] = d0 * d0;
    sq1[i] = d1 * d1;
  }
  double p0[8], p1[8];
  for (int l = 0; l < 8; ++l) {
    p0[l] = ((sq0[l] + sq0[8 + l]) + sq0[16 + l]) + sq0[24 + l];  // partial sums over i mod 8, in order of i
    p1[l] = ((sq1[l] + sq1[8 + l]) + sq1[16 + l]) + sq1[24 + l];
  }
  const double s0 = ((p0[0] + p0[1]) + (p0[2] + p0[3])) + ((p0[4] + p0[5]) + (p0[6] + p0[7]));
  const double s1 = ((p1[0] + p1[1]) + (p1[2] + p1[3])) + ((p1[4] + p1[5]) + (p1[6] + p1[7]));
  return s1 < s0;
}

// The shared exponent of a block from the bits of its amax (finite, non-zero): the floor
// rule's, then for kSearch the search's choice. Only a block with a saturating element can
// prefer e + 1: otherwise every |y| <= 6, where the e + 1 grid {0, 1, 2, 3, 4, 6} (in units
// of 2^e) is a subset of the e grid, so each exact square is no smaller for e + 1, and so is
// its sum (same order, monotone rounding): S(e+1) < S(e) cannot hold. Skips ~60% of blocks.
template <bool kSearch, typename T>
IRIS_INLINE int block_exponent(const T* v, uint32_t amax) {
  int e = floor_log2_bits(amax) - 2;
  if (e < -127) e = -127;
  const uint32_t six_times_scale = (uint32_t(e + 2 + 127) << 23) | 0x00400000u;  // 1.5 * 2^(e+2)
  if (kSearch && e + 1 <= 125 && amax > six_times_scale && plus_one_is_better(v, e))
    e += 1;  // (never above 125: 6 * 2^126 overflows)
  return e;
}

// The codes (one per byte) of 32 values scaled by 2^-e.
template <typename T>
IRIS_INLINE void block_codes(const T* v, int e, uint8_t* c) {
  const float inv = pow2f(-e);
  for (int i = 0; i < 32; ++i) c[i] = e2m1_encode(load_f32(v[i]) * inv);
}

// What mxfp4_decode gives back for the codes of 32 values scaled by 2^-e (e in [-127, 125]),
// computed from the values rather than the codes: |y| rounded to the grid by
// e2m1_round_magnitude (e2m1_encode's comparisons), the sign of v unless that rounds to zero
// (the encoder writes +0 there), times the block's scale. Each product is exact (a grid value
// of two significant bits times a power of two), as is the decoder's, so the bits are the same.
// A loop of its own: folded into block_codes' loop, mxfp4 conversion took 1.17x the user
// time (seven pairs on the 1.83 GB snapshot), presumably the byte and float stores of one
// loop vectorising worse.
template <typename T>
IRIS_INLINE void block_decoded(const T* v, int e, float* out) {
  const float inv = pow2f(-e), scale = e8m0_to_f32(uint8_t(e + 127));
  for (int i = 0; i < 32; ++i) {
    const uint32_t bits = f32_bits(load_f32(v[i]));
    const float r = e2m1_round_magnitude(f32_from_bits(bits & 0x7fffffffu) * inv);
    const uint32_t sign = (bits & 0x80000000u) * uint32_t(r != 0.0f);
    out[i] = f32_from_bits(f32_bits(r) | sign) * scale;
  }
}

// One block of 32 values, read straight from the input (a staging copy would cost a
// store-forwarding stall per block). With kDecoded, also their 32 decoded values.
template <bool kSearch, bool kDecoded, typename T>
IRIS_INLINE void encode_block(const T* v, uint8_t* codes, uint8_t* scale, float* decoded) {
  uint32_t amax = 0;  // |v| bits; NaN and Inf are >= 0x7f800000
  for (int i = 0; i < 32; ++i) amax = std::max(amax, f32_bits(load_f32(v[i])) & 0x7fffffffu);
  if (amax == 0 || amax >= 0x7f800000u) {
    std::memset(codes, 0, 16);
    *scale = amax == 0 ? 0 : 0xff;
    if constexpr (kDecoded)  // code 0 times the scale: +0, or the canonical NaN of scale 0xFF
      for (int i = 0; i < 32; ++i) decoded[i] = amax == 0 ? 0.0f : f32_from_bits(kCanonicalNanBits);
    return;
  }
  const int e = block_exponent<kSearch>(v, amax);
  *scale = uint8_t(e + 127);
  alignas(64) uint8_t c[32];
  block_codes(v, e, c);
  for (int j = 0; j < 16; ++j) codes[j] = pack_low_first(load_pair(c + 2 * j));
  if constexpr (kDecoded) block_decoded(v, e, decoded);
}

}  // namespace iris::quant::detail
