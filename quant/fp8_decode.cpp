#include "quant/fp8.h"
#include "quant/tables.h"

namespace iris::quant {

float fp8_scale_at(const Fp8Scales& s, uint64_t n, uint64_t k, uint64_t b, uint64_t r, uint64_t c) {
  uint64_t i = 0;
  switch (s.granularity) {
    case Fp8Granularity::kTensor: i = b; break;
    case Fp8Granularity::kChannel: i = b * n + r; break;
    case Fp8Granularity::kBlock: {
      const uint64_t gn = (n + s.block_n - 1) / s.block_n, gk = (k + s.block_k - 1) / s.block_k;
      i = (b * gn + r / s.block_n) * gk + c / s.block_k;
      break;
    }
    case Fp8Granularity::kGroup: i = (b * n + r) * ((k + s.group - 1) / s.group) + c / s.group; break;
  }
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

void fp8_decode(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < int64_t(batch * n); ++row) {
    const uint64_t b = uint64_t(row) / n, r = uint64_t(row) % n;
    for (uint64_t c = 0; c < k; ++c)
      out[row * k + c] = canonical_nan_if_nan(e4m3_to_f32(codes[row * k + c]) * fp8_scale_at(s, n, k, b, r, c));
  }
}

}  // namespace iris::quant
