// Element encoders: one FP32 value to one code. Header-only and IRIS_HD, so a CUDA encoder
// can reuse them.
//  - e2m1_encode, e4m3_encode, nf4_encode_fast, dynamic_map_encode_fast: the forms the fast
//    CPU encoders inline into vectorised loops: no data-dependent branches, no divisions.
//  - nf4_encode, dynamic_map_encode: bitsandbytes' own code (csrc/kernels.cu), kept as
//    written because they are the definitions.
// tests/quant checks each fast form against its oracle (e2m1_encode_ref / e4m3_encode_ref:
// nearest grid value by exhaustive search; the bitsandbytes functions) over a sweep of the
// FP32 range plus every tie point.
#pragma once

#include <cstdint>

#include "common/float_bits.h"
#include "quant/tables.h"

namespace iris::quant {

// E2M1 code of y (already divided by the block scale): round to nearest, ties to the even
// mantissa, saturating at +-6 (Inf too); results that round to zero are +0 (code 0, never
// the -0 code 8); NaN -> 0.
IRIS_HD uint8_t e2m1_encode(float y) {
  // The number of grid midpoints below |y| is the magnitude code. A tie goes to the even
  // code, so the comparison is '>' where the even neighbour is below (0.25 -> 0, 1.25 -> 1,
  // 2.5 -> 2, 5 -> 4) and '>=' where it is above (0.75 -> 1, 1.75 -> 2, 3.5 -> 4).
  const float a = f32_from_bits(f32_bits(y) & 0x7fffffffu);
  const uint32_t m = uint32_t(a > 0.25f) + uint32_t(a >= 0.75f) + uint32_t(a > 1.25f) + uint32_t(a >= 1.75f) +
                     uint32_t(a > 2.5f) + uint32_t(a >= 3.5f) + uint32_t(a > 5.0f);
  const uint32_t sign = m != 0 ? (f32_bits(y) >> 28) & 8u : 0u;
  return uint8_t(m | sign);
}

// FP32 -> FP8 E4M3 "fn": round to nearest even (subnormals included), saturating at +-448
// (finite overflow and +-Inf alike: the clamp producers apply before torch's cast, which
// would otherwise give NaN above 464); NaN -> 0x7F. The sign of zero is kept (-0 -> 0x80).
IRIS_HD uint8_t e4m3_encode(float x) {
  const uint32_t bits = f32_bits(x), sign = (bits >> 24) & 0x80u;
  uint32_t a = bits & 0x7fffffffu;
  const bool nan = a > 0x7f800000u;
  a = a > 0x43e00000u ? 0x43e00000u : a;  // saturate to 448
  // Normal results (|x| >= 2^-6): round the FP32 mantissa to 3 bits, ties to even, then
  // rebias the exponent 127 -> 7. A carry out of the mantissa bumps the exponent, as it should.
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  const uint32_t normal = (r >> 20) - (120u << 3);
  // Subnormal results: multiples of 2^-9. Adding 2^23 rounds |x| * 512 (exact) to an integer,
  // ties to even, in the FP32 adder itself; 8 would be 2^-6, the first normal code.
  const float q = (f32_from_bits(a) * 512.0f + 8388608.0f) - 8388608.0f;
  const uint32_t sub = uint32_t(q);
  const uint32_t code = a >= 0x3c800000u ? normal : sub;
  return uint8_t(nan ? 0x7fu : (sign | code));
}

// The value of the code e4m3_encode(x) picks, as e4m3_to_f32 gives it (NaN: the canonical
// NaN), from e4m3_encode's own arithmetic rather than from the code: branch-free, so an
// encoder's loop can write the decoded values beside the codes and stay vectorised. Normal
// results keep the rounded FP32 bits (exponent and 3 mantissa bits); subnormal ones are the
// rounded multiple of 2^-9. tests/quant checks it against e4m3_to_f32(e4m3_encode(x)).
IRIS_HD float e4m3_round(float x) {
  const uint32_t bits = f32_bits(x), sign = bits & 0x80000000u;
  uint32_t a = bits & 0x7fffffffu;
  const bool nan = a > 0x7f800000u;
  a = a > 0x43e00000u ? 0x43e00000u : a;  // saturate to 448
  const uint32_t normal = (a + 0x7ffffu + ((a >> 20) & 1u)) & 0xfff00000u;
  const float q = (f32_from_bits(a) * 512.0f + 8388608.0f) - 8388608.0f;  // as in e4m3_encode
  const uint32_t sub = f32_bits(q * 0.001953125f);                          // exact: q * 2^-9
  const uint32_t v = a >= 0x3c800000u ? normal : sub;
  return f32_from_bits(nan ? kCanonicalNanBits : (sign | v));
}

// NF4 code of x (already normalized by the block absmax): bitsandbytes' dQuantizeNF4, the
// same comparisons in the same order. This is the definition; nf4_encode_fast is the same
// function written for vector units and is tested against it.
IRIS_HD uint8_t nf4_encode(float x) {
  if (x > nf4_threshold(7)) {
    if (x > nf4_threshold(11)) {
      if (x > nf4_threshold(13)) return x > nf4_threshold(14) ? 15 : 14;
      return x > nf4_threshold(12) ? 13 : 12;
    }
    if (x > nf4_threshold(9)) return x > nf4_threshold(10) ? 11 : 10;
    return x > nf4_threshold(8) ? 9 : 8;
  }
  if (x > nf4_threshold(3)) {
    if (x > nf4_threshold(5)) return x > nf4_threshold(6) ? 7 : 6;
    return x > nf4_threshold(4) ? 5 : 4;
  }
  if (x > nf4_threshold(1)) return x > nf4_threshold(2) ? 3 : 2;
  return x > nf4_threshold(0) ? 1 : 0;
}

// The same code as nf4_encode, branch-free: the number of thresholds x exceeds (strict '>',
// so NaN exceeds none and gets code 0, as in the tree).
IRIS_HD uint8_t nf4_encode_fast(float x) {
  uint8_t c = 0;
  for (int i = 0; i < 15; ++i) c = x > nf4_threshold(i) ? uint8_t(c + 1) : c;  // a masked add per threshold
  return c;
}

// 8-bit code of x in the signed dynamic map (dynamic_map_value), as bitsandbytes'
// dQuantize<0> (csrc/kernels.cu) computes it, written the same way: a 7-step binary search
// over the sorted map, then a comparison with the FP32 midpoint (a + b) * 0.5f to the
// neighbour on the side of x. That is the nearest entry except where x is within rounding
// of a midpoint, so it is copied, not replaced by a generic nearest search. NaN -> 0.
IRIS_HD uint8_t dynamic_map_encode(float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f;
  float val = dynamic_map_value(uint8_t(pivot));
  for (int i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = dynamic_map_value(uint8_t(pivot));
  }
  if (upper_pivot == 255) upper = dynamic_map_value(255);
  if (lower_pivot == 0) lower = dynamic_map_value(0);
  if (x > val) {
    const float midpoint = (upper + val) * 0.5f;
    return uint8_t(x > midpoint ? upper_pivot : pivot);
  }
  const float midpoint = (lower + val) * 0.5f;
  return uint8_t(x < midpoint ? lower_pivot : pivot);
}

// The same code as dynamic_map_encode, without data-dependent branches. bnb's search only
// ever compares x with the 127 odd entries 1, 3, ..., 253 (a complete binary tree over
// them), so it ends at pivot 2c, where c = the number of those entries below x, between
// lower_pivot 2c - 1 (0 when c = 0) and upper_pivot 2c + 1. c is found by a branchless
// binary search; the final midpoint comparison is bnb's. `map` holds the 256 values of
// dynamic_map_value (a plain array, so a loop over many x vectorises with gathers).
IRIS_HD uint8_t dynamic_map_encode_fast(float x, const float* map) {
  uint32_t c = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 7
#endif
  for (int k = 6; k >= 0; --k) {  // steps 64, 32, ..., 1 (a counted loop, so it is unrolled)
    const uint32_t step = 1u << k;
    c += x > map[2 * (c + step) - 1] ? step : 0;
  }
  const uint32_t pivot = 2 * c, lower_pivot = pivot - uint32_t(c != 0), upper_pivot = pivot + 1;
  const float val = map[pivot];
  // Both midpoints, then a select: no load depends on the comparison (vectorises cleanly).
  const float mid_upper = (map[upper_pivot] + val) * 0.5f, mid_lower = (map[lower_pivot] + val) * 0.5f;
  const uint32_t code = x > val ? (x > mid_upper ? upper_pivot : pivot) : (x < mid_lower ? lower_pivot : pivot);
  return uint8_t(code);
}

}  // namespace iris::quant
