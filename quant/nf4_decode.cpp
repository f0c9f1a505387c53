// Fast bitsandbytes 4-bit decoding: per block, the absmax once and the 16 possible products
// code value * absmax (the same FP32 products as the oracle), then one lookup per element.
#include <type_traits>

#include "common/parallel_for.h"
#include "quant/nf4.h"
#include "quant/nibble_lookup.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

// Elements [i0, i1) of one block, into out[i - i0].
template <typename Out>
IRIS_INLINE void decode_span_body(const uint8_t* codes, uint64_t i0, uint64_t i1, const float* table, float absmax, Out* out) {
  Out lut[16];
  for (int c = 0; c < 16; ++c) detail::store_value(&lut[c], canonical_nan_if_nan(table[c] * absmax));
  uint64_t i = i0;
  if (i % 2 == 1 && i < i1) *out++ = lut[codes[i++ / 2] & 15];
  if constexpr (std::is_same_v<Out, float>) {  // whole bytes, vectorised (the hot case)
    const uint64_t nbytes = i < i1 ? (i1 - i) / 2 : 0;
    detail::lookup_nibbles(codes + i / 2, nbytes, lut, detail::NibbleOrder::kHighFirst, out);
    i += 2 * nbytes;
    out += 2 * nbytes;
  }
  for (; i + 1 < i1; i += 2) {  // whole bytes: high nibble first
    const uint8_t byte = codes[i / 2];
    out[0] = lut[byte >> 4];
    out[1] = lut[byte & 15];
    out += 2;
  }
  if (i < i1) *out = lut[codes[i / 2] >> 4];
}
IRIS_HOT_LOOP_CLONES((template <typename Out>), (<Out>), void, decode_span,
                     (const uint8_t* codes, uint64_t i0, uint64_t i1, const float* table, float absmax, Out* out),
                     (codes, i0, i1, table, absmax, out))

// codes[0] holds element `base` (even), so a caller may pass a window of the codes.
template <typename Out>
void decode(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, Out* out, uint64_t base = 0) {
  if (i1 <= i0) return;
  float table[16];
  for (int c = 0; c < 16; ++c) table[c] = p.code_table ? p.code_table[c] : nf4_to_f32(uint8_t(c));
  const uint64_t bs = p.block_size, b0 = i0 / bs, b1 = (i1 - 1) / bs + 1;
  parallel_for(int64_t(b1 - b0), int64_t(std::max<uint64_t>(1, kGrainValues / bs)), [&](int64_t j) {
    const uint64_t b = b0 + uint64_t(j);
    const uint64_t s = b * bs > i0 ? b * bs : i0, e = (b + 1) * bs < i1 ? (b + 1) * bs : i1;
    decode_span(codes, s - base, e - base, table, bnb_block_absmax(p, b), out + (s - i0));
  });
}

}  // namespace

void bnb4_decode_range(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out) {
  decode(codes, i0, i1, p, out);
}

void bnb4_decode_window(const uint8_t* codes, uint64_t first, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out) {
  decode(codes, i0, i1, p, out, first);
}

void bnb4_decode(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, float* out) { decode(codes, 0, n, p, out); }

void bnb4_decode_bf16(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, uint16_t* out) { decode(codes, 0, n, p, out); }

}  // namespace iris::quant
