// The AVX2 intrinsics for quant/*.cpp, where simd.h's IRIS_X86_INTRINSICS allows them: the
// AVX-512 loops' 16-lane vectors as two 8-lane halves (V16), with the same operations lane by
// lane, so that the two paths give the same bits (most x86 CPUs in use have AVX2 and no
// AVX-512: Intel client parts, older AMD, many cloud instances).
#pragma once

#include <cstdint>

#include "quant/intrinsics.h"
#include "quant/simd.h"

#ifdef IRIS_X86_INTRINSICS
namespace iris::quant::detail {

// 16 FP32 lanes: elements 0-7 in lo, 8-15 in hi (lane l of an AVX-512 vector is lane l % 8 of
// lo or hi).
struct V16 {
  __m256 lo, hi;
};

// 8 values as FP32: BF16 bit patterns widened (exact), or FP32 as they are.
IRIS_AVX2 inline __m256 load8(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
IRIS_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
template <typename T>
IRIS_AVX2 inline V16 load16x2(const T* p) {
  return {load8(p), load8(p + 8)};
}

IRIS_AVX2 inline __m256 abs8(__m256 x) { return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff))); }

// x with the lanes whose `bits & 0x7f800000` is all ones (NaN, Inf) set to +0: AVX-512's
// maskz_mov under a "finite" mask.
IRIS_AVX2 inline __m256 zero_nonfinite(__m256 x, __m256 of) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256i nonfinite = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(of), exp_mask), exp_mask);
  return _mm256_castsi256_ps(_mm256_andnot_si256(nonfinite, _mm256_castps_si256(x)));
}

// The largest of 8 unsigned 32-bit lanes.
IRIS_AVX2 inline uint32_t reduce_max_epu32(__m256i x) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4e));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xb1));
  return uint32_t(_mm_cvtsi128_si32(m));
}

}  // namespace iris::quant::detail
#endif
