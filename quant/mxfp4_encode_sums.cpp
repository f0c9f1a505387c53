// MXFP4 encoding with the quality report's error sums gathered in the same pass
// (mxfp4_encode_sums in mxfp4.h): what a requantizing converter runs over every weight.
//
// Before, the converter widened each piece of BF16 rows to FP32, checked it for NaN/Inf,
// encoded it writing the decoded values beside the codes, then summed the errors: four passes
// and two FP32 buffers per piece. Here each block of 32 values is loaded once; its amax finds
// NaN/Inf; its codes and decoded values come from the same registers; the decoded values feed
// the error sums of error_sums_groups.h directly, in the element order add_error_sums uses,
// so the sums are the same bits. With AVX-512 or AVX2 and k a multiple of 32 (every block whole,
// so the blocks of consecutive rows are consecutive), hand-written vector code; otherwise the
// scalar block encoder of mxfp4_block.h feeding an ErrorSumsStream.
#include <cstring>

#include "quant/error_sums_avx2.h"
#include "quant/error_sums_avx512.h"
#include "quant/error_sums_groups.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_block.h"

namespace iris::quant {

namespace {

using detail::ErrorSumsStream;
#ifdef IRIS_X86_INTRINSICS
using detail::load16;
using detail::V16;
#endif

template <bool kSearch, typename T>
uint64_t encode_sums_portable(const T* in, uint64_t rows, uint64_t k, uint8_t* codes, uint8_t* scales, ErrorSums* sums) {
  const uint64_t blocks = mxfp4_row_scales(k);
  ErrorSumsStream stream(sums);
  uint64_t nonfinite = 0;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t b = 0; b < blocks; ++b) {
      const uint64_t i = r * blocks + b, count = b + 1 < blocks ? 32 : k - b * 32;
      const T* src = in + r * k + b * 32;
      float v[32], d[32];
      for (uint64_t j = 0; j < 32; ++j) v[j] = j < count ? detail::load_f32(src[j]) : 0.0f;  // zero padded
      detail::encode_block<kSearch, true>(v, codes + i * 16, scales + i, d);
      nonfinite += scales[i] == 0xff;  // only a block holding NaN or Inf gets scale 0xFF
      stream.add(v, d, count);
    }
  stream.finish();
  return nonfinite;
}

#ifdef IRIS_X86_INTRINSICS

// The E2M1 magnitude codes of a = |y| (0 <= a < 8, finite): e2m1_encode's nearest-even
// rounding in arithmetic. Below 1 the grid is the multiples of 0.5, so the code is 2a rounded
// to the nearest even integer (the conversion's own rounding). From 1 up the grid is FP32 with
// one mantissa bit: the bits rounded at bit 22 (nearest even; a carry bumps the exponent) give
// exponent and mantissa, rebased so that 1.0 (bits 0x3F800000 >> 22 = 254) is code 2; above 5
// the code saturates at 7 (6.0).
IRIS_AVX512 inline __m512i magnitude_codes(__m512 a) {
  const __m512i bits = _mm512_castps_si512(a);
  const __m512i half_ulp = _mm512_add_epi32(_mm512_set1_epi32(0x1fffff), _mm512_and_si512(_mm512_srli_epi32(bits, 22), _mm512_set1_epi32(1)));
  const __m512i normal = _mm512_min_epu32(_mm512_sub_epi32(_mm512_srli_epi32(_mm512_add_epi32(bits, half_ulp), 22), _mm512_set1_epi32(252)),
                                          _mm512_set1_epi32(7));
  const __m512i small = _mm512_cvt_roundps_epi32(_mm512_add_ps(a, a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(a, _mm512_set1_ps(1.0f), _CMP_GE_OQ), small, normal);
}

// 16 codes (one per 32-bit lane) packed two per byte, the earlier element in the low nibble,
// into 8 bytes (the low half of the result).
IRIS_AVX512 inline __m128i pack_codes(__m512i c) {
  const __m512i odd_up = _mm512_sllv_epi32(c, _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0));
  return _mm512_cvtepi64_epi8(_mm512_or_si512(odd_up, _mm512_srli_epi64(odd_up, 32)));
}

// One whole block at v: its codes and scale byte, its 32 values as FP32 into r and their
// decoded values into d. Returns whether it holds NaN or Inf.
template <bool kSearch, typename T>
IRIS_AVX512 inline bool encode_block_values(const T* v, uint8_t* codes, uint8_t* scale, __m512* r, __m512* d) {
  const __m512 v0 = load16(v), v1 = load16(v + 16);
  const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff);
  const __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), abs_bits), a1 = _mm512_and_si512(_mm512_castps_si512(v1), abs_bits);
  const uint32_t amax = _mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));  // NaN and Inf are >= 0x7f800000
  __m512 d0, d1;
  bool nonfinite = false;
  if (amax == 0 || amax >= 0x7f800000u) {  // codes 0 decode to +0, or to the canonical NaN of scale 0xFF
    std::memset(codes, 0, 16);
    nonfinite = amax != 0;
    *scale = nonfinite ? 0xff : 0;
    d0 = d1 = nonfinite ? _mm512_castsi512_ps(_mm512_set1_epi32(int(kCanonicalNanBits))) : _mm512_setzero_ps();
  } else {
    const int e = detail::block_exponent<kSearch>(v, amax);
    *scale = uint8_t(e + 127);
    const __m512 inv = _mm512_set1_ps(detail::pow2f(-e));  // |v| * 2^-e: exact, the same as |v * 2^-e|
    const __m512i sign_bit = _mm512_set1_epi32(int(0x80000000u));
    __m512i c[2];
    const __m512i a[2] = {a0, a1};
    const __m512 vv[2] = {v0, v1};
    for (int h = 0; h < 2; ++h) {
      const __m512i m = magnitude_codes(_mm512_mul_ps(_mm512_castsi512_ps(a[h]), inv));
      const __m512i s = _mm512_srli_epi32(_mm512_and_si512(_mm512_castps_si512(vv[h]), sign_bit), 28);  // 8 for negative values
      c[h] = _mm512_mask_or_epi32(m, _mm512_test_epi32_mask(m, m), m, s);  // a value rounded to 0 is +0
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm_unpacklo_epi64(pack_codes(c[0]), pack_codes(c[1])));
    // The decoded values: the code's E2M1 value times the block's scale, exact (as in the decoder).
    const __m512 lut = _mm512_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f);
    const __m512 sc = _mm512_set1_ps(e8m0_to_f32(uint8_t(e + 127)));
    d0 = _mm512_mul_ps(_mm512_permutexvar_ps(c[0], lut), sc);
    d1 = _mm512_mul_ps(_mm512_permutexvar_ps(c[1], lut), sc);
  }
  r[0] = v0;
  r[1] = v1;
  d[0] = d0;
  d[1] = d1;
  return nonfinite;
}

// k % 32 == 0: the blocks of consecutive rows are consecutive, i = 0 .. rows * k / 32 - 1,
// each giving sum_vectors its two vectors. (A struct, not a lambda: a lambda does not take
// the target attribute its intrinsics need.)
template <bool kSearch, typename T>
struct BlockValues {
  const T* in;
  uint8_t *codes, *scales;
  uint64_t i = 0, nonfinite = 0;
  IRIS_AVX512 void operator()(__m512* r, __m512* d) {
    nonfinite += encode_block_values<kSearch>(in + i * 32, codes + i * 16, scales + i, r, d);
    ++i;
  }
};

template <bool kSearch, typename T>
IRIS_AVX512 uint64_t encode_sums_avx512(const T* in, uint64_t rows, uint64_t k, uint8_t* codes, uint8_t* scales, ErrorSums* sums) {
  BlockValues<kSearch, T> blocks{in, codes, scales};
  detail::sum_vectors<2>(rows * (k / 32), sums, blocks);
  return blocks.nonfinite;
}

// The same block on AVX2 (two 8-lane halves per 16 values, quant/avx2.h): the operations of
// encode_block_values lane by lane, so the same codes, scales and decoded values.
IRIS_AVX2 inline __m256i magnitude_codes8(__m256 a) {
  const __m256i bits = _mm256_castps_si256(a);
  const __m256i half_ulp = _mm256_add_epi32(_mm256_set1_epi32(0x1fffff), _mm256_and_si256(_mm256_srli_epi32(bits, 22), _mm256_set1_epi32(1)));
  const __m256i normal = _mm256_min_epu32(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_add_epi32(bits, half_ulp), 22), _mm256_set1_epi32(252)),
                                          _mm256_set1_epi32(7));
  // 2a rounded to the nearest integer, ties to even, whatever MXCSR says (AVX-512's embedded
  // rounding); the rounded value converts exactly.
  const __m256i small = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_add_ps(a, a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm256_blendv_epi8(small, normal, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(1.0f), _CMP_GE_OQ)));
}

template <bool kSearch, typename T>
IRIS_AVX2 inline bool encode_block_values_avx2(const T* v, uint8_t* codes, uint8_t* scale, V16* r, V16* d) {
  const __m256 x[4] = {detail::load8(v), detail::load8(v + 8), detail::load8(v + 16), detail::load8(v + 24)};
  const __m256i abs_bits = _mm256_set1_epi32(0x7fffffff);
  __m256i a[4];
  for (int h = 0; h < 4; ++h) a[h] = _mm256_and_si256(_mm256_castps_si256(x[h]), abs_bits);
  const uint32_t amax = detail::reduce_max_epu32(_mm256_max_epu32(_mm256_max_epu32(a[0], a[1]), _mm256_max_epu32(a[2], a[3])));
  __m256 y[4];
  bool nonfinite = false;
  if (amax == 0 || amax >= 0x7f800000u) {  // codes 0 decode to +0, or to the canonical NaN of scale 0xFF
    std::memset(codes, 0, 16);
    nonfinite = amax != 0;
    *scale = nonfinite ? 0xff : 0;
    const __m256 fill = nonfinite ? _mm256_castsi256_ps(_mm256_set1_epi32(int(kCanonicalNanBits))) : _mm256_setzero_ps();
    for (auto& h : y) h = fill;
  } else {
    const int e = detail::block_exponent<kSearch>(v, amax);
    *scale = uint8_t(e + 127);
    const __m256 inv = _mm256_set1_ps(detail::pow2f(-e));  // |v| * 2^-e: exact
    const __m256 lut = _mm256_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f);
    const __m256 sc = _mm256_set1_ps(e8m0_to_f32(uint8_t(e + 127)));
    alignas(32) int32_t c[32];
    for (int h = 0; h < 4; ++h) {
      const __m256i m = magnitude_codes8(_mm256_mul_ps(_mm256_castsi256_ps(a[h]), inv));
      const __m256i sign = _mm256_and_si256(_mm256_castps_si256(x[h]), _mm256_set1_epi32(int(0x80000000u)));
      // a value rounded to 0 is +0: the sign only on nonzero codes
      const __m256i signed_bit = _mm256_andnot_si256(_mm256_cmpeq_epi32(m, _mm256_setzero_si256()), sign);
      _mm256_store_si256(reinterpret_cast<__m256i*>(c + 8 * h), _mm256_or_si256(m, _mm256_srli_epi32(signed_bit, 28)));
      // The decoded value: the magnitude's E2M1 value with the code's sign, times the scale (exact).
      y[h] = _mm256_mul_ps(_mm256_or_ps(_mm256_permutevar8x32_ps(lut, m), _mm256_castsi256_ps(signed_bit)), sc);
    }
    for (int j = 0; j < 16; ++j) codes[j] = uint8_t(c[2 * j] | (c[2 * j + 1] << 4));  // the earlier element in the low nibble
  }
  r[0] = {x[0], x[1]};
  r[1] = {x[2], x[3]};
  d[0] = {y[0], y[1]};
  d[1] = {y[2], y[3]};
  return nonfinite;
}

template <bool kSearch, typename T>
struct BlockValuesAvx2 {
  const T* in;
  uint8_t *codes, *scales;
  uint64_t i = 0, nonfinite = 0;
  IRIS_AVX2 void operator()(V16* r, V16* d) {
    nonfinite += encode_block_values_avx2<kSearch>(in + i * 32, codes + i * 16, scales + i, r, d);
    ++i;
  }
};

template <bool kSearch, typename T>
IRIS_AVX2 uint64_t encode_sums_avx2(const T* in, uint64_t rows, uint64_t k, uint8_t* codes, uint8_t* scales, ErrorSums* sums) {
  BlockValuesAvx2<kSearch, T> blocks{in, codes, scales};
  detail::sum_vectors_avx2<2>(rows * (k / 32), sums, blocks);
  return blocks.nonfinite;
}

#endif

using Path = detail::VectorPath;  // kBest, or one path forced (tests)

template <typename T>
uint64_t encode_sums(const T* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales, ErrorSums* sums,
                     [[maybe_unused]] Path path = Path::kBest) {
  const bool search = rule == Mxfp4ScaleRule::kSearch;
#ifdef IRIS_X86_INTRINSICS
  const bool whole = k % 32 == 0;
  if (whole && (path == Path::kBest || path == Path::kAvx512) && detail::cpu_has_avx512f())
    return search ? encode_sums_avx512<true>(in, rows, k, codes, scales, sums) : encode_sums_avx512<false>(in, rows, k, codes, scales, sums);
  if (whole && (path == Path::kBest || path == Path::kAvx2) && detail::cpu_has_avx2())
    return search ? encode_sums_avx2<true>(in, rows, k, codes, scales, sums) : encode_sums_avx2<false>(in, rows, k, codes, scales, sums);
#endif
  return search ? encode_sums_portable<true>(in, rows, k, codes, scales, sums) : encode_sums_portable<false>(in, rows, k, codes, scales, sums);
}

}  // namespace

uint64_t mxfp4_encode_sums(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                           ErrorSums* sums) {
  return encode_sums(in, rows, k, rule, codes, scales, sums);
}

uint64_t mxfp4_encode_sums_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                                ErrorSums* sums) {
  return encode_sums(in, rows, k, rule, codes, scales, sums);
}

namespace detail {

uint64_t mxfp4_encode_sums_portable(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                                    ErrorSums* sums) {
  return encode_sums(in, rows, k, rule, codes, scales, sums, Path::kPortable);
}

bool mxfp4_encode_sums_avx2(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                            ErrorSums* sums, uint64_t* nonfinite) {
#ifdef IRIS_X86_INTRINSICS
  if (!cpu_has_avx2()) return false;
  *nonfinite = encode_sums(in, rows, k, rule, codes, scales, sums, Path::kAvx2);
  return true;
#else
  (void)in, (void)rows, (void)k, (void)rule, (void)codes, (void)scales, (void)sums, (void)nonfinite;
  return false;
#endif
}

}  // namespace detail

}  // namespace iris::quant
