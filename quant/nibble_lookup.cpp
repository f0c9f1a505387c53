#include "quant/nibble_lookup.h"

#include "quant/avx2.h"
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

// 8 bytes -> 16 values per step on AVX2: each byte's two codes in two 32-bit lanes, the
// 16-entry table as two 8-entry halves (one permute each), the half picked by the code's bit 3.
IRIS_AVX2 uint64_t lookup_avx2(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
  const __m256 low = _mm256_loadu_ps(lut), high = _mm256_loadu_ps(lut + 8);
  const int f = order == NibbleOrder::kHighFirst ? 4 : 0, s = 4 - f;
  const __m256i shift = _mm256_setr_epi32(f, s, f, s, f, s, f, s), low4 = _mm256_set1_epi32(15);
  uint64_t j = 0;
  for (; j + 8 <= nbytes; j += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + j));
    const __m128i twice = _mm_unpacklo_epi8(b, b);  // each byte twice: its two elements
    for (int h = 0; h < 2; ++h) {
      const __m128i part = h == 0 ? twice : _mm_srli_si128(twice, 8);
      const __m256i code = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(part), shift), low4);
      const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(low, code), _mm256_permutevar8x32_ps(high, code),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));  // bit 3 as the sign bit
      _mm256_storeu_ps(out + 2 * j + 8 * h, v);
    }
  }
  return j;
}
#endif

}  // namespace

bool lookup_nibbles_avx2(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
#ifdef IRIS_X86_INTRINSICS
  if (!cpu_has_avx2()) return false;
  const uint64_t done = lookup_avx2(bytes, nbytes, lut, order, out);
  lookup_scalar(bytes + done, nbytes - done, lut, order, out + 2 * done);
  return true;
#else
  (void)bytes, (void)nbytes, (void)lut, (void)order, (void)out;
  return false;
#endif
}

void lookup_nibbles(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out) {
  uint64_t done = 0;
#ifdef IRIS_X86_INTRINSICS
  if (nbytes >= 16 && cpu_has_avx512f()) done = lookup_avx512(bytes, nbytes, lut, order, out);
  else if (nbytes >= 8 && cpu_has_avx2()) done = lookup_avx2(bytes, nbytes, lut, order, out);
#endif
  lookup_scalar(bytes + done, nbytes - done, lut, order, out + 2 * done);
}

}  // namespace iris::quant::detail
