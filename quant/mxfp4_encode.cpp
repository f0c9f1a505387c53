// Fast MXFP4 encoding: the oracle's rules (mxfp4_ref.cpp) in loops the compiler vectorises.
// Per 32-element block: one integer max gives the amax and detects NaN/Inf; the shared
// exponent comes from its bits; elements are scaled by an exact power of two and rounded by
// e2m1_encode (comparisons only); pairs of codes are packed with 16-bit shifts.
#include <cstring>

#include "common/parallel_for.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_block.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

using detail::encode_block;

// Blocks [b0, b1) of the row-major input, `blocks` per row of k values, and with kDecoded
// their decoded values in the row-major `decoded`. (The rule is a template parameter so the
// floor rule's loop carries no trace of the search.)
template <bool kSearch, bool kDecoded, typename T>
IRIS_INLINE void encode_blocks_body(const T* in, uint64_t k, uint64_t blocks, uint64_t b0, uint64_t b1, uint8_t* codes,
                                 uint8_t* scales, float* decoded) {
  for (uint64_t i = b0; i < b1; ++i) {
    const uint64_t r = i / blocks, b = i % blocks, count = b + 1 < blocks ? 32 : k - b * 32;
    const T* src = in + r * k + b * 32;
    float* dst = kDecoded ? decoded + r * k + b * 32 : nullptr;
    if (count == 32) {
      encode_block<kSearch, kDecoded>(src, codes + i * 16, scales + i, dst);
    } else {  // the last block of a row, zero padded; only its `count` decoded values are kept
      float v[32], d[32];
      for (uint64_t j = 0; j < 32; ++j) v[j] = j < count ? detail::load_f32(src[j]) : 0.0f;
      encode_block<kSearch, kDecoded>(v, codes + i * 16, scales + i, d);
      if constexpr (kDecoded) std::memcpy(dst, d, count * sizeof(float));
    }
  }
}
IRIS_HOT_LOOP_CLONES((template <bool kSearch, bool kDecoded, typename T>), (<kSearch, kDecoded, T>), void, encode_blocks,
                     (const T* in, uint64_t k, uint64_t blocks, uint64_t b0, uint64_t b1, uint8_t* codes, uint8_t* scales, float* decoded),
                     (in, k, blocks, b0, b1, codes, scales, decoded))

template <bool kDecoded, typename T>
void encode(const T* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales, float* decoded) {
  const uint64_t blocks = mxfp4_row_scales(k), total = rows * blocks, chunk = 1024;
  const int64_t chunks = int64_t((total + chunk - 1) / chunk);
  parallel_for(chunks, 2, [&](int64_t c) {  // a chunk: 32K values
    const uint64_t b0 = uint64_t(c) * chunk, b1 = b0 + chunk < total ? b0 + chunk : total;
    if (rule == Mxfp4ScaleRule::kSearch) encode_blocks<true, kDecoded>(in, k, blocks, b0, b1, codes, scales, decoded);
    else encode_blocks<false, kDecoded>(in, k, blocks, b0, b1, codes, scales, decoded);
  });
}

}  // namespace

void mxfp4_encode(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  encode<false>(in, rows, k, rule, codes, scales, nullptr);
}

void mxfp4_encode_decoded(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                          float* decoded) {
  encode<true>(in, rows, k, rule, codes, scales, decoded);
}

void mxfp4_encode_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales) {
  encode<false>(in, rows, k, rule, codes, scales, nullptr);
}

}  // namespace iris::quant
