// Fast MXFP4 decoding: per block, the 16 possible products code value * scale are computed
// once (the same FP32 products as the oracle), then every element is a table lookup.
#include <type_traits>

#include "common/parallel_for.h"
#include "quant/avx512.h"
#include "quant/mxfp4.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

template <typename Out>
IRIS_INLINE void decode_block_body(const uint8_t* q, uint8_t scale_byte, uint64_t count, Out* out) {
  const float scale = e8m0_to_f32(scale_byte);
  Out lut[16];
  for (int c = 0; c < 16; ++c) detail::store_value(&lut[c], canonical_nan_if_nan(e2m1_to_f32(uint8_t(c)) * scale));
  if (count == 32) {
    for (int j = 0; j < 16; ++j) {
      out[2 * j] = lut[q[j] & 15];
      out[2 * j + 1] = lut[q[j] >> 4];
    }
    return;
  }
  for (uint64_t i = 0; i < count; ++i) out[i] = lut[i % 2 == 0 ? q[i / 2] & 15 : q[i / 2] >> 4];  // last, partial block
}
IRIS_HOT_LOOP_CLONES((template <typename Out>), (<Out>), void, decode_block,
                     (const uint8_t* q, uint8_t scale_byte, uint64_t count, Out* out),
                     (q, scale_byte, count, out))

#ifdef IRIS_X86_INTRINSICS
// `blocks` whole blocks of 32 values with AVX-512: each block's 16 products (the E2M1 values
// times its scale, one vector multiply: the same FP32 products as decode_block's table, and
// never NaN unless the scale is, which is then the canonical NaN) held in a register, and its
// 16 code bytes looked up low nibble first.
IRIS_AVX512 void decode_blocks_avx512(const uint8_t* q, const uint8_t* scales, uint64_t blocks, float* out) {
  alignas(64) float values[16];
  for (int c = 0; c < 16; ++c) values[c] = e2m1_to_f32(uint8_t(c));
  const __m512 e2m1 = _mm512_load_ps(values), nan = _mm512_set1_ps(f32_from_bits(kCanonicalNanBits));
  const __m512i shift = detail::nibble_shifts(false);
  for (uint64_t b = 0; b < blocks; ++b) {
    const __m512 lut = scales[b] == 0xff ? nan : _mm512_mul_ps(e2m1, _mm512_set1_ps(e8m0_to_f32(scales[b])));
    detail::lookup_16_bytes(q + 16 * b, shift, lut, out + 32 * b);
  }
}
#endif

template <typename Out>
void decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, Out* out) {
  const uint64_t blocks = mxfp4_row_scales(k);
#ifdef IRIS_X86_INTRINSICS
  if constexpr (std::is_same_v<Out, float>) {
    if (detail::cpu_has_avx512f()) {  // a row at a time: its whole blocks, then a partial last one
      const uint64_t whole = k / 32;
      parallel_for(int64_t(rows), int64_t(std::max<uint64_t>(1, kGrainValues / std::max<uint64_t>(k, 1))), [&](int64_t r) {
        const uint64_t i = uint64_t(r) * blocks;
        decode_blocks_avx512(codes + i * 16, scales + i, whole, out + uint64_t(r) * k);
        if (whole < blocks) decode_block(codes + (i + whole) * 16, scales[i + whole], k - whole * 32, out + uint64_t(r) * k + whole * 32);
      });
      return;
    }
  }
#endif
  parallel_for(int64_t(rows * blocks), int64_t(kGrainValues / 32), [&](int64_t i) {
    const uint64_t r = uint64_t(i) / blocks, b = uint64_t(i) % blocks;
    const uint64_t count = b + 1 < blocks ? 32 : k - b * 32;
    decode_block(codes + uint64_t(i) * 16, scales[i], count, out + r * k + b * 32);
  });
}

}  // namespace

void mxfp4_decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out) {
  decode(codes, scales, rows, k, out);
}

void mxfp4_decode_bf16(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, uint16_t* out) {
  decode(codes, scales, rows, k, out);
}

}  // namespace iris::quant
