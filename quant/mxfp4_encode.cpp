#include <cmath>

#include "quant/mxfp4.h"
#include "quant/tables.h"

namespace iris::quant {

uint8_t e2m1_encode(float y) {
  const float a = std::fabs(y);
  uint8_t m;  // magnitude code; ties go to the even mantissa (codes 0, 2, 4, 6 have m = 0)
  if (a <= 0.25f) m = 0;
  else if (a < 0.75f) m = 1;
  else if (a <= 1.25f) m = 2;
  else if (a < 1.75f) m = 3;
  else if (a <= 2.5f) m = 4;
  else if (a < 3.5f) m = 5;
  else if (a <= 5.0f) m = 6;
  else m = 7;  // saturates at 6
  return (m != 0 && y < 0) ? uint8_t(m | 8) : m;
}

namespace {

// floor(log2 |a|) for finite a > 0, from the FP32 bits (subnormals included).
int floor_log2(float a) {
  const uint32_t b = f32_bits(a);
  const int e = int((b >> 23) & 0xff);
  if (e) return e - 127;
  return -127 - __builtin_clz(b & 0x7fffff) + 9 - 1;  // subnormal: position of the leading bit
}

// Squared error of quantizing `v` (32 values) with scale 2^e.
double block_error(const float* v, int e) {
  double err = 0;
  for (int i = 0; i < 32; ++i) {
    const float y = std::ldexp(v[i], -e);
    const double d = double(e2m1_to_f32(e2m1_encode(y))) * std::ldexp(1.0, e) - double(v[i]);
    err += d * d;
  }
  return err;
}

void encode_block(const float* v, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scale) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < 32; ++i) {
    finite &= std::isfinite(v[i]);
    amax = std::fmax(amax, std::fabs(v[i]));
  }
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
  if (rule == Mxfp4ScaleRule::kSearch && e + 1 <= 127 && block_error(v, e + 1) < block_error(v, e)) e += 1;
  *scale = uint8_t(e + 127);
  for (int i = 0; i < 32; i += 2) {
    // ldexp by a power of two is exact, so y is v / 2^e exactly.
    const uint8_t lo = e2m1_encode(std::ldexp(v[i], -e)), hi = e2m1_encode(std::ldexp(v[i + 1], -e));
    codes[i / 2] = uint8_t(lo | (hi << 4));
  }
}

void encode_rows(const float* in, uint64_t r0, uint64_t r1, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  const uint64_t blocks = (k + 31) / 32;
  float buf[32];
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t b = 0; b < blocks; ++b) {
      for (uint64_t i = 0; i < 32; ++i) buf[i] = b * 32 + i < k ? in[r * k + b * 32 + i] : 0.f;
      encode_block(buf, rule, codes + (r * blocks + b) * 16, scales + r * blocks + b);
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
