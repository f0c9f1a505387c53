// The MXFP4 oracle: FORMATS.md 2.1-2.3 written plainly, one element at a time. The fast
// codecs (mxfp4_decode.cpp, mxfp4_encode.cpp) and the CUDA kernels must match it bit for bit.
#include <cmath>
#include <cstring>

#include "quant/mxfp4.h"
#include "quant/tables.h"

namespace iris::quant {

void mxfp4_decode_ref(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out) {
  const uint64_t row_bytes = mxfp4_row_bytes(k), row_scales = mxfp4_row_scales(k);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t i = 0; i < k; ++i) {
      const uint8_t byte = codes[r * row_bytes + i / 2];
      const uint8_t code = i % 2 == 0 ? byte & 15 : byte >> 4;  // low nibble = even element
      const float scale = e8m0_to_f32(scales[r * row_scales + i / 32]);
      out[r * k + i] = canonical_nan_if_nan(e2m1_to_f32(code) * scale);
    }
}

uint8_t e2m1_encode_ref(float y) {
  if (std::isnan(y)) return 0;
  const double a = std::fabs(double(y));
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(a - e2m1_to_f32(uint8_t(c))), best_d = std::fabs(a - e2m1_to_f32(uint8_t(best)));
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c;  // ties to the even mantissa
  }
  if (a >= 6.0) best = 7;  // saturate (Inf included)
  return best == 0 ? 0 : uint8_t(best | (y < 0 ? 8 : 0));
}

namespace {

// floor(log2 a) of a finite a > 0, subnormals included.
int floor_log2(float a) {
  int e;
  std::frexp(a, &e);  // a = f * 2^e with f in [0.5, 1)
  return e - 1;
}

// 2^e as an FP32 value, e in [-126, 127] (normal, so multiplying by it is exact or a single
// rounding into the subnormals).
float pow2f(int e) { return std::ldexp(1.0f, e); }

// S(e) or S(e+1) of the search rule (mxfp4.h): the squared error in units of 2^e.
double search_error(const float* v, int e, bool plus_one) {
  double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 32; ++i) {
    const float y = v[i] * pow2f(-e);
    double d;
    if (!plus_one) d = double(e2m1_to_f32(e2m1_encode_ref(y))) - double(y);
    else d = 2.0 * double(e2m1_to_f32(e2m1_encode_ref(v[i] * pow2f(-(e + 1))))) - double(y);
    partial[i % 8] += d * d;
  }
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) + ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

// One block of 32 values (zero padded).
void encode_block_ref(const float* v, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scale) {
  bool finite = true;
  float amax = 0;
  for (int i = 0; i < 32; ++i) {
    finite = finite && std::isfinite(v[i]);
    amax = std::fmax(amax, std::fabs(v[i]));
  }
  std::memset(codes, 0, 16);
  if (!finite) {
    *scale = 0xff;
    return;
  }
  if (amax == 0) {
    *scale = 0;
    return;
  }
  int e = floor_log2(amax) - 2;  // emax of E2M1 is 2
  if (e < -127) e = -127;        // never above 127: amax < 2^128 gives e <= 125
  if (rule == Mxfp4ScaleRule::kSearch && e + 1 <= 125 && search_error(v, e, true) < search_error(v, e, false)) e += 1;
  *scale = uint8_t(e + 127);
  for (int i = 0; i < 32; ++i) {
    const uint8_t c = e2m1_encode_ref(v[i] * pow2f(-e));
    codes[i / 2] |= uint8_t(i % 2 == 0 ? c : c << 4);
  }
}

}  // namespace

void mxfp4_encode_ref(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  const uint64_t blocks = mxfp4_row_scales(k);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t b = 0; b < blocks; ++b) {
      float v[32];
      for (uint64_t i = 0; i < 32; ++i) v[i] = b * 32 + i < k ? in[r * k + b * 32 + i] : 0.0f;
      encode_block_ref(v, rule, codes + (r * blocks + b) * 16, scales + r * blocks + b);
    }
}

}  // namespace iris::quant
