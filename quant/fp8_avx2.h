// The FP8 E4M3 encoder's AVX2 steps, shared by the one-pass encoder with error sums
// (fp8_encode_sums.cpp) and the plain encoders (fp8_encode.cpp): amax8 and encode8 are the
// AVX-512 path's amax16 and encode16 on 8 lanes, operation for operation, and encode8's codes
// and decoded values are e4m3_encode's and fp8_decode's bits (tests/quant/fp8_test.cpp runs
// both on every AVX2 machine).
#pragma once

#include <bit>
#include <cstdint>

#include "common/float_bits.h"
#include "quant/intrinsics.h"
#include "quant/simd.h"

#ifdef IRIS_X86_INTRINSICS
namespace iris::quant::detail {

// The running max of |x| bits (NaN as 0) over 8 lanes; counts the non-finite ones.
IRIS_AVX2 inline __m256i amax8(__m256 x, __m256i acc, uint64_t& nonfinite) {
  const __m256i a = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  const __m256i nonfin = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7fffff));  // a <= 0x7fffffff: signed is unsigned here
  nonfinite += uint64_t(std::popcount(unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(nonfin)))));
  return _mm256_max_epu32(acc, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)), a));  // NaN as 0
}

// The codes of x * mul into codes[0, 8) (e4m3_encode's), and returned, their values times
// scale as fp8_decode gives them back (the canonical NaN for NaN codes).
IRIS_AVX2 inline __m256 encode8(__m256 x, __m256 mul, __m256 scale, uint8_t* codes) {
  const __m256i bits = _mm256_castps_si256(_mm256_mul_ps(x, mul));
  const __m256i abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i a = _mm256_min_epu32(abs, _mm256_set1_epi32(0x43e00000));
  const __m256i r = _mm256_add_epi32(a, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), _mm256_and_si256(_mm256_srli_epi32(a, 20), _mm256_set1_epi32(1))));
  const __m256 two23 = _mm256_set1_ps(8388608.0f);
  const __m256 q = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(512.0f)), two23), two23);
  const __m256i normal = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3c7fffff));  // a >= 0x3c800000
  __m256i code = _mm256_blendv_epi8(_mm256_cvttps_epi32(q), _mm256_sub_epi32(_mm256_srli_epi32(r, 20), _mm256_set1_epi32(960)), normal);
  code = _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80)));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
  // Byte 0 of each lane, in lane order, into 8 bytes.
  const __m256i low_bytes = _mm256_shuffle_epi8(code, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                       0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(codes),
                   _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(low_bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0))));
  __m256i v = _mm256_blendv_epi8(_mm256_castps_si256(_mm256_mul_ps(q, _mm256_set1_ps(0.001953125f))),
                                 _mm256_and_si256(r, _mm256_set1_epi32(int(0xfff00000u))), normal);
  v = _mm256_or_si256(v, _mm256_and_si256(bits, _mm256_set1_epi32(int(0x80000000u))));
  const __m256i canonical = _mm256_set1_epi32(int(kCanonicalNanBits));
  v = _mm256_blendv_epi8(v, canonical, nan);
  const __m256 d = _mm256_mul_ps(_mm256_castsi256_ps(v), scale);
  return _mm256_blendv_ps(d, _mm256_castsi256_ps(canonical), _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
}

}  // namespace iris::quant::detail
#endif
