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
  // The reference, with each block's scale and the 16 code values looked up once.
  float grid[16];
  for (int c = 0; c < 16; ++c) grid[c] = e2m1_to_f32(uint8_t(c));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < int64_t(rows); ++r)
    for (uint64_t b = 0; b < blocks; ++b) {
      const float s = e8m0_to_f32(scales[r * blocks + b]);
      const uint8_t* q = codes + (r * blocks + b) * 16;
      float* o = out + r * k + b * 32;
      if ((b + 1) * 32 <= k) {
        for (int i = 0; i < 16; ++i) {
          o[2 * i] = canonical_nan_if_nan(grid[q[i] & 15] * s);
          o[2 * i + 1] = canonical_nan_if_nan(grid[q[i] >> 4] * s);
        }
      } else {
        mxfp4_decode_ref(codes + r * blocks * 16, scales + r * blocks, 1, k, out + r * k);  // partial last block: the plain way
      }
    }
}

}  // namespace iris::quant
