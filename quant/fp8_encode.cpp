#include <algorithm>
#include <cmath>

#include "quant/fp8.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {
IRIS_INLINE uint8_t e4m3_code(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint32_t sign = (f32_bits(x) >> 24) & 0x80u;
  const float a = std::fabs(x);
  if (a >= 464.f) return uint8_t(sign | 0x7e);  // 464 is the tie between 448 and NaN: RNE gives 448
  if (a < 0.015625f) {
    // Subnormal range: multiples of 2^-9. Adding 2^23 rounds to an integer, ties to even,
    // in the FP32 adder itself (no libm call; not folded away without -ffast-math).
    const float q = (a * 512.f + 8388608.f) - 8388608.f;
    return uint8_t(sign | uint32_t(q));  // q == 8 is 2^-6, the first normal (code 0x08)
  }
  uint32_t b = f32_bits(a);
  b += 0x7ffffu + ((b >> 20) & 1u);  // round the mantissa to 3 bits, ties to even
  const uint32_t e = (b >> 23) - 120u, m = (b >> 20) & 7u;
  if (e > 15 || (e == 15 && m == 7)) return uint8_t(sign | 0x7e);
  return uint8_t(sign | (e << 3) | m);
}
}  // namespace

uint8_t e4m3_encode(float x) { return e4m3_code(x); }

uint64_t fp8_scale_count(uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk) {
  switch (g) {
    case Fp8Granularity::kTensor: return batch;
    case Fp8Granularity::kChannel: return batch * n;
    case Fp8Granularity::kBlock: return batch * ((n + bn - 1) / bn) * ((k + bk - 1) / bk);
    default: return 0;
  }
}

namespace {

// One scaling unit: rows [r0, r1) x columns [c0, c1) of a row-major [n, k] matrix.
IRIS_HOT_LOOP void encode_unit(const float* m, uint64_t k, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1, uint8_t* codes, float* scale) {
  float amax = 0;
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t c = c0; c < c1; ++c) amax = max_abs(amax, m[r * k + c]);
  // torch evaluates `448 / amax` (scalar / tensor) as reciprocal(amax) * 448 and `1 / scale`
  // as reciprocal(scale): two roundings, not one division. On ties this decides the code
  // (tests/quant: 10.5 -> 11 with torch's multiplier, 10 with an IEEE division).
  volatile float recip = 1.f / amax;
  const float mul = amax > 0 ? 448.f * recip : 1.f;
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t c = c0; c < c1; ++c) codes[r * k + c] = e4m3_code(std::clamp(m[r * k + c] * mul, -448.f, 448.f));
  *scale = 1.f / mul;
}

void encode_matrix(const float* m, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                   bool parallel) {
  if (g == Fp8Granularity::kTensor) {
    encode_unit(m, k, 0, n, 0, k, codes, scales);
    return;
  }
  if (g == Fp8Granularity::kChannel) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < int64_t(n); ++r) encode_unit(m, k, uint64_t(r), uint64_t(r) + 1, 0, k, codes, scales + r);
    return;
  }
  const uint64_t gn = (n + bn - 1) / bn, gk = (k + bk - 1) / bk;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t u = 0; u < int64_t(gn * gk); ++u) {
    const uint64_t i = uint64_t(u) / gk, j = uint64_t(u) % gk;
    encode_unit(m, k, i * bn, std::min(n, (i + 1) * bn), j * bk, std::min(k, (j + 1) * bk), codes, scales + u);
  }
}

}  // namespace

void fp8_encode_ref(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk,
                    uint8_t* codes, float* scales) {
  const uint64_t per = fp8_scale_count(1, n, k, g, bn, bk);
  for (uint64_t b = 0; b < batch; ++b) encode_matrix(in + b * n * k, n, k, g, bn, bk, codes + b * n * k, scales + b * per, false);
}

void fp8_encode(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes,
                float* scales) {
  const uint64_t per = fp8_scale_count(1, n, k, g, bn, bk);
  for (uint64_t b = 0; b < batch; ++b) encode_matrix(in + b * n * k, n, k, g, bn, bk, codes + b * n * k, scales + b * per, true);
}

}  // namespace iris::quant
