#include "quant/nvfp4.h"

#include <cmath>
#include <cstring>

#include "common/float_bits.h"
#include "quant/element_encode.h"
#include "quant/tables.h"

namespace iris::quant {

void nvfp4_decode_rows(const uint8_t* codes, const uint8_t* scales, float tensor_scale, uint64_t rows, uint64_t k, Nvfp4Convention c,
                       float* out) {
  const uint64_t nb = nvfp4_row_scales(k), rb = nvfp4_row_bytes(k);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* rc = codes + r * rb;
    const uint8_t* rs = scales + r * nb;
    float* o = out + r * k;
    for (uint64_t b = 0; b < nb; ++b) {
      const float s = nvfp4_block_scale(rs[b], tensor_scale, c);
      const uint64_t end = std::min<uint64_t>(k, b * 16 + 16);
      for (uint64_t j = b * 16; j < end; ++j) o[j] = nvfp4_value(uint8_t(rc[j / 2] >> (4 * (j & 1))), s, c);
    }
  }
}

float nvfp4_tensor_scale(float amax) { return amax == 0.f ? 1.f : amax / 2688.0f; }

uint8_t nvfp4_encode_element(float y) {
  // ModelOpt's _cast_fp4: searchsorted over the midpoints (torch's lower bound, which sends
  // NaN past every bound), plus one at the midpoints 0.75, 1.75 and 3.5 (ties to even).
  const float a = std::fabs(y);
  if (a != a) return 7;
  const uint8_t m = e2m1_encode(a);  // the same nearest-even magnitude, saturating at 6
  return uint8_t(m | (y < 0.f ? 8u : 0u));
}

void nvfp4_encode_rows(const float* in, uint64_t rows, uint64_t k, float t, uint8_t* codes, uint8_t* scales, float* decoded) {
  const uint64_t nb = nvfp4_row_scales(k), rb = nvfp4_row_bytes(k);
  const float six_t = 6.0f * t;
  for (uint64_t r = 0; r < rows; ++r) {
    const float* x = in + r * k;
    uint8_t* rc = codes + r * rb;
    std::memset(rc, 0, rb);
    for (uint64_t b = 0; b < nb; ++b) {
      const uint64_t j0 = b * 16, j1 = std::min<uint64_t>(k, j0 + 16);
      float amax = 0.f;
      for (uint64_t j = j0; j < j1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
      float q = amax / six_t;
      if (q == 0.f) q = 1.0f;
      // (q <= 448 up to rounding, as amax <= the matrix's: e4m3_encode's saturation, where
      // torch's cast would give NaN only from 464 on, is never reached.)
      const uint8_t sb = e4m3_encode(q);
      scales[r * nb + b] = sb;
      const float denom = e4m3_to_f32(sb) * t;
      const float back = nvfp4_block_scale(sb, t, {});
      for (uint64_t j = j0; j < j1; ++j) {
        const uint8_t c = nvfp4_encode_element(x[j] / denom);
        rc[j / 2] = uint8_t(rc[j / 2] | (c << (4 * (j & 1))));
        if (decoded) decoded[r * k + j] = nvfp4_value(c, back, {});
      }
    }
  }
}

}  // namespace iris::quant
