#include <cmath>

#include "quant/mxfp4.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {
IRIS_INLINE uint8_t e2m1_code(float y) {
  // Count the grid midpoints below |y|: '>' where the tie goes down to the even mantissa
  // (0.25 -> 0, 1.25 -> 1, 2.5 -> 2, 5 -> 4), '>=' where it goes up (0.75 -> 1, 1.75 -> 2,
  // 3.5 -> 4). Branch-free, so the loops vectorise; NaN compares false and gives 0.
  const float a = std::fabs(y);
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return uint8_t(m | ((y < 0.f && m) ? 8 : 0));
}
}  // namespace

uint8_t e2m1_encode(float y) { return e2m1_code(y); }

namespace {

// floor(log2 |a|) for finite a > 0, from the FP32 bits (subnormals included).
int floor_log2(float a) {
  const uint32_t b = f32_bits(a);
  const int e = int((b >> 23) & 0xff);
  if (e) return e - 127;
  return -127 - __builtin_clz(b & 0x7fffff) + 9 - 1;  // subnormal: position of the leading bit
}

// 2^e as a float, e in [-126, 127] (always a normal number here: multiplying by it is exact).
IRIS_INLINE float pow2(int e) { return f32_from_bits(uint32_t(e + 127) << 23); }

// Squared error of quantizing `v` (32 values) with scale 2^e.
double block_error(const float* v, int e) {
  const float inv = pow2(-e), scale = pow2(e);
  double err = 0;
  for (int i = 0; i < 32; ++i) {
    const double d = double(e2m1_to_f32(e2m1_code(v[i] * inv)) * scale) - double(v[i]);
    err += d * d;
  }
  return err;
}

IRIS_INLINE void encode_block(const float* v, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scale) {
  float amax = 0;
  uint32_t nonfinite = 0;
  for (int i = 0; i < 32; ++i) {
    nonfinite |= (f32_bits(v[i]) & 0x7f800000u) == 0x7f800000u;
    amax = max_abs(amax, v[i]);
  }
  const bool finite = !nonfinite;
  for (int i = 0; i < 16; ++i) codes[i] = 0;
  if (!finite) {
    *scale = 0xff;
    return;
  }
  if (amax == 0) {
    *scale = 0;
    return;
  }
  int e = floor_log2(amax) - 2;
  if (e < -127) e = -127;
  if (rule == Mxfp4ScaleRule::kSearch && e >= -126 && e + 1 <= 125 && block_error(v, e + 1) < block_error(v, e)) e += 1;
  *scale = uint8_t(e + 127);
  // amax < 2^(e+3) and e >= -127, so 2^-e is a normal float and v * 2^-e is exact.
  const float inv = f32_from_bits(uint32_t(127 - e) << 23);
  for (int i = 0; i < 32; i += 2) codes[i / 2] = uint8_t(e2m1_code(v[i] * inv) | (e2m1_code(v[i + 1] * inv) << 4));
}

IRIS_HOT_LOOP void encode_rows(const float* in, uint64_t r0, uint64_t r1, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  const uint64_t blocks = (k + 31) / 32;
  float buf[32];
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t b = 0; b < blocks; ++b) {
      const float* src = in + r * k + b * 32;
      if ((b + 1) * 32 > k) {  // the last, partial block: pad with zeros
        for (uint64_t i = 0; i < 32; ++i) buf[i] = b * 32 + i < k ? src[i] : 0.f;
        src = buf;
      }
      encode_block(src, rule, codes + (r * blocks + b) * 16, scales + r * blocks + b);
    }
}

}  // namespace

void mxfp4_encode_ref(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  encode_rows(in, 0, rows, k, rule, codes, scales);
}

void mxfp4_encode(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < int64_t(rows); ++r) encode_rows(in, uint64_t(r), uint64_t(r) + 1, k, rule, codes, scales);
}

}  // namespace iris::quant
