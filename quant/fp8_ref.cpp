// The FP8 E4M3 oracle: FORMATS.md 4.1-4.3 written plainly, one element at a time. The fast
// codecs (fp8_decode.cpp, fp8_encode.cpp) and the CUDA kernels must match it bit for bit.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "quant/fp8.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

// Index of the scale of element (b, r, c).
uint64_t scale_index(Fp8Granularity g, uint64_t n, uint64_t k, uint64_t bn, uint64_t bk, uint64_t group, uint64_t b,
                     uint64_t r, uint64_t c) {
  switch (g) {
    case Fp8Granularity::kTensor: return b;
    case Fp8Granularity::kChannel: return b * n + r;
    case Fp8Granularity::kBlock: {
      const uint64_t gn = (n + bn - 1) / bn, gk = (k + bk - 1) / bk;
      return (b * gn + r / bn) * gk + c / bk;
    }
    case Fp8Granularity::kGroup: return (b * n + r) * ((k + group - 1) / group) + c / group;
  }
  return 0;
}

}  // namespace

float fp8_scale_at(const Fp8Scales& s, uint64_t n, uint64_t k, uint64_t b, uint64_t r, uint64_t c) {
  const uint64_t i = scale_index(s.granularity, n, k, s.block_n, s.block_k, s.group, b, r, c);
  switch (s.type) {
    case ScaleType::kF32: return static_cast<const float*>(s.data)[i];
    case ScaleType::kBf16: return bf16_to_f32(static_cast<const uint16_t*>(s.data)[i]);
    case ScaleType::kF16: return f16_to_f32(static_cast<const uint16_t*>(s.data)[i]);
  }
  return 0.f;
}

void fp8_decode_ref(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out) {
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < k; ++c) {
        const uint64_t i = (b * n + r) * k + c;
        out[i] = canonical_nan_if_nan(e4m3_to_f32(codes[i]) * fp8_scale_at(s, n, k, b, r, c));
      }
}

uint8_t e4m3_encode_ref(float x) {
  if (std::isnan(x)) return 0x7f;
  const double a = std::min(std::fabs(double(x)), 448.0);  // saturate
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(a - e4m3_to_f32(uint8_t(c))), best_d = std::fabs(a - e4m3_to_f32(uint8_t(best)));
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c;  // ties to the even mantissa
  }
  return uint8_t(best | (std::signbit(x) ? 0x80 : 0));
}

uint64_t fp8_scale_count(uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk) {
  switch (g) {
    case Fp8Granularity::kTensor: return batch;
    case Fp8Granularity::kChannel: return batch * n;
    case Fp8Granularity::kBlock: return batch * ((n + bn - 1) / bn) * ((k + bk - 1) / bk);
    case Fp8Granularity::kGroup: return 0;
  }
  return 0;
}

void fp8_encode_ref(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk,
                    uint8_t* codes, float* scales) {
  if (g == Fp8Granularity::kGroup) return;  // not an encoder target (fp8.h)
  const uint64_t count = fp8_scale_count(batch, n, k, g, bn, bk);
  auto unit = [&](uint64_t b, uint64_t r, uint64_t c) { return scale_index(g, n, k, bn, bk, 1, b, r, c); };
  // amax of every unit, NaN ignored (fmax)
  std::vector<float> amax(count, 0.0f), mul(count);
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < k; ++c) {
        float& m = amax[unit(b, r, c)];
        m = std::fmax(m, std::fabs(in[(b * n + r) * k + c]));
      }
  for (uint64_t u = 0; u < count; ++u) {
    const float recip = 1.0f / amax[u];
    mul[u] = amax[u] > 0 ? std::min(448.0f * recip, FLT_MAX) : 1.0f;
    scales[u] = 1.0f / mul[u];
  }
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < k; ++c) {
        const uint64_t i = (b * n + r) * k + c;
        const float y = in[i] * mul[unit(b, r, c)];
        codes[i] = e4m3_encode_ref(std::isnan(y) ? y : std::clamp(y, -448.0f, 448.0f));
      }
}

}  // namespace iris::quant
