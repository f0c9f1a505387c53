#include "quant/mxfp4.h"
#include "quant/tables.h"

namespace iris::quant {

void mxfp4_decode_ref(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out) {
  const uint64_t blocks = (k + 31) / 32;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t i = 0; i < k; ++i) {
      const uint8_t byte = codes[r * blocks * 16 + i / 2];
      const uint8_t code = (i % 2 == 0) ? (byte & 15) : (byte >> 4);
      out[r * k + i] = canonical_nan_if_nan(e2m1_to_f32(code) * e8m0_to_f32(scales[r * blocks + i / 32]));
    }
}

void mxfp4_decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out) {
  const uint64_t blocks = (k + 31) / 32;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < int64_t(rows); ++r)
    mxfp4_decode_ref(codes + r * blocks * 16, scales + r * blocks, 1, k, out + r * k);
}

}  // namespace iris::quant
