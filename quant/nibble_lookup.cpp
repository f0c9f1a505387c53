#include "quant/nibble_lookup.h"

#include "quant/avx512.h"
#include "quant/simd.h"

namespace iris::quant::detail {

namespace {

void lookup_scalar(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
  const int first = order == NibbleOrder::kHighFirst ? 4 : 0, second = 4 - first;
  for (uint64_t j = 0; j < nbytes; ++j) {
    out[2 * j] = lut[(bytes[j] >> first) & 15];
    out[2 * j + 1] = lut[(bytes[j] >> second) & 15];
  }
}

#ifdef IRIS_X86_INTRINSICS
// 16 bytes -> 32 values per step, the table held in a register. Returns the bytes done (a
// multiple of 16).
IRIS_AVX512 uint64_t lookup_avx512(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
  const __m512 table = _mm512_loadu_ps(lut);
  const __m512i shift = nibble_shifts(order == NibbleOrder::kHighFirst);
  uint64_t j = 0;
  for (; j + 16 <= nbytes; j += 16) lookup_16_bytes(bytes + j, shift, table, out + 2 * j);
  return j;
}
#endif

}  // namespace

void lookup_nibbles(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
  uint64_t done = 0;
#ifdef IRIS_X86_INTRINSICS
  if (nbytes >= 16 && cpu_has_avx512f()) done = lookup_avx512(bytes, nbytes, lut, order, out);
#endif
  lookup_scalar(bytes + done, nbytes - done, lut, order, out + 2 * done);
}

}  // namespace iris::quant::detail
