// Fast MXFP4 decoding: per block, the 16 possible products code value * scale are computed
// once (the same FP32 products as the oracle), then every element is a table lookup.
#include <type_traits>

#include "quant/mxfp4.h"
#include "quant/nibble_lookup.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

template <typename Out>
IRIS_HOT_LOOP void decode_block(const uint8_t* q, uint8_t scale_byte, uint64_t count, Out* out) {
  const float scale = e8m0_to_f32(scale_byte);
  Out lut[16];
  for (int c = 0; c < 16; ++c) detail::store_value(&lut[c], canonical_nan_if_nan(e2m1_to_f32(uint8_t(c)) * scale));
  if constexpr (std::is_same_v<Out, float>) {
    if (count == 32) return detail::lookup_nibbles(q, 16, lut, detail::NibbleOrder::kLowFirst, out);
  }
  if (count == 32) {
    for (int j = 0; j < 16; ++j) {
      out[2 * j] = lut[q[j] & 15];
      out[2 * j + 1] = lut[q[j] >> 4];
    }
    return;
  }
  for (uint64_t i = 0; i < count; ++i) out[i] = lut[i % 2 == 0 ? q[i / 2] & 15 : q[i / 2] >> 4];  // last, partial block
}

template <typename Out>
void decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, Out* out) {
  const uint64_t blocks = mxfp4_row_scales(k);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(rows * blocks); ++i) {
    const uint64_t r = uint64_t(i) / blocks, b = uint64_t(i) % blocks;
    const uint64_t count = b + 1 < blocks ? 32 : k - b * 32;
    decode_block(codes + uint64_t(i) * 16, scales[i], count, out + r * k + b * 32);
  }
}

}  // namespace

void mxfp4_decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out) {
  decode(codes, scales, rows, k, out);
}

void mxfp4_decode_bf16(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, uint16_t* out) {
  decode(codes, scales, rows, k, out);
}

}  // namespace iris::quant
