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
// 16 bytes -> 32 values per step: each byte duplicated into two 32-bit lanes, the even lane
// shifted to the earlier element's nibble, then one vpermps per 16 lanes over the table held
// in a register. Returns the bytes done (a multiple of 16).
IRIS_AVX512 uint64_t lookup_avx512(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order,
                                                         float* out) {
  const __m512 table = _mm512_loadu_ps(lut);
  const int first = order == NibbleOrder::kHighFirst ? 4 : 0, second = 4 - first;
  // _mm512_set_epi32 lists lane 15 first: even lanes (the earlier element) shift by `first`.
  const __m512i shift = _mm512_set_epi32(second, first, second, first, second, first, second, first, second, first, second, first,
                                         second, first, second, first);
  const __m512i low4 = _mm512_set1_epi32(15);
  uint64_t j = 0;
  for (; j + 16 <= nbytes; j += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + j));
    const __m512i v0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), shift), low4);
    const __m512i v1 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(b, b)), shift), low4);
    _mm512_storeu_ps(out + 2 * j, _mm512_permutexvar_ps(v0, table));
    _mm512_storeu_ps(out + 2 * j + 16, _mm512_permutexvar_ps(v1, table));
  }
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
