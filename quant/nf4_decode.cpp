#include <algorithm>

#include "common/float_bits.h"
#include "quant/nf4.h"

namespace iris::quant {

float bnb_block_absmax(const Bnb4bitParams& p, uint64_t b) {
  if (!p.double_quant) return p.absmax[b];
  volatile float scaled = p.nested_map[p.absmax_codes[b]] * p.nested_absmax[b / p.nested_block_size];
  return scaled + p.nested_offset;  // the volatile keeps the two roundings apart
}

void bnb4_decode_ref(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out) {
  for (uint64_t i = i0; i < i1; ++i) {
    const uint8_t byte = codes[i / 2];
    const uint8_t code = (i % 2 == 0) ? (byte >> 4) : (byte & 15);
    out[i - i0] = canonical_nan_if_nan(p.code_table[code] * bnb_block_absmax(p, i / p.block_size));
  }
}

void bnb4_decode_range(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out) {
  const int64_t chunks = int64_t((i1 - i0 + 65535) / 65536);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const uint64_t a = i0 + uint64_t(c) * 65536, b = std::min(i1, a + 65536);
    bnb4_decode_ref(codes, a, b, p, out + (a - i0));
  }
}

void bnb4_decode(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, float* out) {
  const int64_t chunks = int64_t((n + 65535) / 65536);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const uint64_t i0 = uint64_t(c) * 65536, i1 = std::min(n, i0 + 65536);
    bnb4_decode_ref(codes, i0, i1, p, out + i0);
  }
}

}  // namespace iris::quant
