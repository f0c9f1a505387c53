// The AVX-512 intrinsics for quant/*.cpp, where simd.h's IRIS_X86_INTRINSICS allows them.
#pragma once

#include <cstdint>

#include "quant/intrinsics.h"
#include "quant/simd.h"

#ifdef IRIS_X86_INTRINSICS
namespace iris::quant::detail {

// 16 bytes of packed 4-bit codes -> 32 values of the 16-entry table `lut`: each byte
// duplicated into two 32-bit lanes, each lane shifted by `shift` (0 or 4: which nibble is the
// earlier element's) and masked, then one permute per 16 lanes. The table's bits are copied.
IRIS_AVX512 inline void lookup_16_bytes(const uint8_t* bytes, __m512i shift, __m512 lut, float* out) {
  const __m512i low4 = _mm512_set1_epi32(15);
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m512i v0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), shift), low4);
  const __m512i v1 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(b, b)), shift), low4);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(v0, lut));
  _mm512_storeu_ps(out + 16, _mm512_permutexvar_ps(v1, lut));
}

// 16 values as FP32: BF16 bit patterns widened (exact), or FP32 as they are.
IRIS_AVX512 inline __m512 load16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
IRIS_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

// The shifts for lookup_16_bytes: even lanes (the earlier element of a byte) by `first`.
IRIS_AVX512 inline __m512i nibble_shifts(bool high_first) {
  const int f = high_first ? 4 : 0, s = 4 - f;  // _mm512_set_epi32 lists lane 15 first
  return _mm512_set_epi32(s, f, s, f, s, f, s, f, s, f, s, f, s, f, s, f);
}

}  // namespace iris::quant::detail
#endif

