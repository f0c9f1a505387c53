// FP8 E4M3 encoding (per channel or per block) with the quality report's error sums gathered
// in the same pass (fp8_encode_sums in fp8.h): what a requantizing converter runs over every
// weight. As for MXFP4 (mxfp4_encode_sums.cpp): a BF16 source is read from its bits, the
// scaling units' amax pass counts NaN/Inf, and the encode pass computes codes and decoded
// values in registers and feeds them to the error sums in element order (error_sums_avx512.h),
// so codes, scales and sums are the bits of fp8_encode_decoded followed by add_error_sums.
// With AVX-512 or AVX2 and k (and block_k) multiples of 16; otherwise a portable path, element
// by element, with the same bits.
#include <algorithm>
#include <bit>
#include <vector>

#include "quant/error_sums_avx2.h"
#include "quant/error_sums_avx512.h"
#include "quant/error_sums_groups.h"
#include "quant/fp8.h"
#include "quant/fp8_avx2.h"
#include "quant/simd.h"

namespace iris::quant {

namespace {

// The units of the granularities this encodes, as bn x bk blocks: per channel, 1 x k. False
// for the others (fp8.h: not its targets).
bool unit_shape(Fp8Granularity g, uint64_t k, uint64_t* bn, uint64_t* bk) {
  if (g == Fp8Granularity::kChannel) {
    *bn = 1;
    *bk = k;
  }
  return g == Fp8Granularity::kChannel || g == Fp8Granularity::kBlock;
}

// The multiplier and stored scale of a unit from its amax bits (fp8_encode's rule).
inline void unit_scale(uint32_t amax_bits, float* mul, float* scale) {
  *mul = fp8_multiplier(f32_from_bits(amax_bits));
  *scale = 1.0f / *mul;
}

// The portable path: the same passes as the vector one below, element by element: per band of
// bn rows, each unit's amax (abs_bits_no_nan, NaN/Inf counted),
// its multiplier and stored scale (fp8_encode's rule); then the band row by row, each value's
// code (e4m3_encode) and decoded value (encode_run_decoded's: canonical_nan_if_nan(e4m3_round(y)
// * scale)) into the sums, a row segment at a time.
template <typename T>
uint64_t encode_sums_portable(const T* in, uint64_t rows, uint64_t k, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                              ErrorSums* sums) {
  const uint64_t units = (k + bk - 1) / bk;
  std::vector<uint32_t> amax(units);
  std::vector<float> mul(units), scale(units);
  detail::ErrorSumsStream stream(sums);
  uint64_t nonfinite = 0;
  constexpr uint64_t kSegment = 256;
  float x[kSegment], d[kSegment];
  for (uint64_t r0 = 0; r0 < rows; r0 += bn) {
    const uint64_t r1 = std::min(rows, r0 + bn);
    std::fill(amax.begin(), amax.end(), 0u);
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t c = 0; c < k; ++c) {
        const uint32_t a = f32_bits(detail::load_f32(in[r * k + c])) & 0x7fffffffu;
        nonfinite += a >= 0x7f800000u;
        amax[c / bk] = std::max(amax[c / bk], detail::abs_bits_no_nan(f32_from_bits(a)));
      }
    for (uint64_t j = 0; j < units; ++j) {
      unit_scale(amax[j], &mul[j], &scale[j]);
      scales[r0 / bn * units + j] = scale[j];
    }
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t c0 = 0; c0 < k; c0 += kSegment) {
        const uint64_t c1 = std::min(k, c0 + kSegment);
        for (uint64_t c = c0; c < c1; ++c) {
          x[c - c0] = detail::load_f32(in[r * k + c]);
          const float y = x[c - c0] * mul[c / bk];
          codes[r * k + c] = e4m3_encode(y);
          d[c - c0] = canonical_nan_if_nan(e4m3_round(y) * scale[c / bk]);
        }
        stream.add(x, d, c1 - c0);
      }
  }
  stream.finish();
  return nonfinite;
}

#ifdef IRIS_X86_INTRINSICS

using detail::load16;

// The amax pass over 16 values: the running max of |x| bits with NaN as 0 (abs_bits_no_nan),
// and the count of NaN and Inf.
IRIS_AVX512 inline __m512i amax16(__m512 x, __m512i acc, uint64_t& nonfinite) {
  const __m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  nonfinite += uint64_t(std::popcount(unsigned(_mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7f800000)))));
  return _mm512_max_epu32(acc, _mm512_maskz_mov_epi32(_mm512_cmple_epu32_mask(a, _mm512_set1_epi32(0x7f800000)), a));
}

// e4m3_encode and e4m3_round (element_encode.h) of 16 products y = x * mul, operation for
// operation: the codes into 16 bytes, and the decoded values, canonical_nan_if_nan(round(y) *
// scale), returned.
IRIS_AVX512 inline __m512 encode16(__m512 x, __m512 mul, __m512 scale, uint8_t* codes) {
  const __m512i bits = _mm512_castps_si512(_mm512_mul_ps(x, mul));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i a = _mm512_min_epu32(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x43e00000));
  const __m512i r = _mm512_add_epi32(a, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff), _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1))));
  const __m512 two23 = _mm512_set1_ps(8388608.0f);
  const __m512 q = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f)), two23), two23);
  const __mmask16 normal = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x3c800000));
  __m512i code = _mm512_mask_blend_epi32(normal, _mm512_cvttps_epi32(q), _mm512_sub_epi32(_mm512_srli_epi32(r, 20), _mm512_set1_epi32(960)));
  code = _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80)));
  code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_cvtepi32_epi8(code));
  __m512i v = _mm512_mask_blend_epi32(normal, _mm512_castps_si512(_mm512_mul_ps(q, _mm512_set1_ps(0.001953125f))),
                                      _mm512_and_si512(r, _mm512_set1_epi32(int(0xfff00000u))));
  v = _mm512_or_si512(v, _mm512_and_si512(bits, _mm512_set1_epi32(int(0x80000000u))));
  const __m512i canonical = _mm512_set1_epi32(int(kCanonicalNanBits));
  v = _mm512_mask_mov_epi32(v, nan, canonical);
  __m512 d = _mm512_mul_ps(_mm512_castsi512_ps(v), scale);
  return _mm512_mask_mov_ps(d, _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q), _mm512_castsi512_ps(canonical));
}

// The scaling units of rows [r0, r1) (a band of bn rows): the amax of each, then their multipliers and stored scales; returns the
// number of NaN and Inf values read. acc holds 16 lanes per unit.
template <typename T>
IRIS_AVX512 uint64_t unit_scales(const T* in, uint64_t k, uint64_t r0, uint64_t r1, uint64_t bk, uint32_t* acc, float* mul, float* scale) {
  const uint64_t units = (k + bk - 1) / bk;
  uint64_t nonfinite = 0;
  std::fill(acc, acc + units * 16, 0u);
  for (uint64_t r = r0; r < r1; ++r)  // row by row across the units: the prefetchers stream the rows
    for (uint64_t j = 0; j < units; ++j) {
      __m512i a = _mm512_loadu_si512(acc + j * 16);
      for (uint64_t c = j * bk; c < std::min(k, (j + 1) * bk); c += 16) a = amax16(load16(in + r * k + c), a, nonfinite);
      _mm512_storeu_si512(acc + j * 16, a);
    }
  for (uint64_t j = 0; j < units; ++j) unit_scale(_mm512_reduce_max_epu32(_mm512_loadu_si512(acc + j * 16)), &mul[j], &scale[j]);
  return nonfinite;
}

// k % 16 == 0 and bk % 16 == 0: every vector lies in one unit, and the vectors of
// consecutive rows are consecutive. UnitWalk walks them in element order, 16 values a call,
// for sum_vectors; entering a band of bn rows, find_scales(r0, r1) gives its units' multipliers
// and stored scales first (the AVX-512 or the AVX2 amax pass). (Structs, not lambdas: a lambda
// does not take the target attribute its intrinsics need.)
template <typename T>
struct UnitWalk {
  const T* in;
  uint64_t rows, k, bn, bk, units;
  uint8_t* codes;
  float* scales;
  std::vector<uint32_t> acc;  // the amax pass's lanes, 16 per unit
  std::vector<float> mul, scale;
  uint64_t nonfinite = 0, r = 0, c = 0, j = 0, unit_end = 0;
  float m = 0, s = 0;

  UnitWalk(const T* in_, uint64_t rows_, uint64_t k_, uint64_t bn_, uint64_t bk_, uint8_t* codes_, float* scales_)
      : in(in_), rows(rows_), k(k_), bn(bn_), bk(bk_), units((k_ + bk_ - 1) / bk_), codes(codes_), scales(scales_), acc(units * 16),
        mul(units), scale(units) {}

  // Before the next 16 values: the band's scales when entering it, the row's unit.
  template <typename FindScales>
  void enter(FindScales&& find_scales) {
    if (c == 0) {
      if (r % bn == 0) {
        nonfinite += find_scales(r, std::min(rows, r + bn));
        std::copy(scale.begin(), scale.end(), scales + r / bn * units);
      }
      j = 0;
      unit_end = 0;
    }
    if (c == unit_end) {  // the row's next unit
      m = mul[j];
      s = scale[j];
      unit_end = std::min(k, unit_end + bk);
      ++j;
    }
  }
  void advance() {
    if ((c += 16) == k) {
      c = 0;
      ++r;
    }
  }
};

template <typename T>
struct UnitValues : UnitWalk<T> {
  using UnitWalk<T>::UnitWalk;
  IRIS_AVX512 void operator()(__m512* x, __m512* d) {
    auto& w = *this;
    w.enter([&](uint64_t r0, uint64_t r1) { return unit_scales(w.in, w.k, r0, r1, w.bk, w.acc.data(), w.mul.data(), w.scale.data()); });
    x[0] = load16(w.in + w.r * w.k + w.c);
    d[0] = encode16(x[0], _mm512_set1_ps(w.m), _mm512_set1_ps(w.s), w.codes + w.r * w.k + w.c);
    w.advance();
  }
};

template <typename T>
IRIS_AVX512 uint64_t encode_sums_avx512(const T* in, uint64_t rows, uint64_t k, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                                        ErrorSums* sums) {
  UnitValues<T> units(in, rows, k, bn, bk, codes, scales);
  detail::sum_vectors<1>(rows * k / 16, sums, units);
  return units.nonfinite;
}

// The same passes on AVX2: amax8 and encode8 (quant/fp8_avx2.h) are amax16 and encode16 on 8
// lanes, operation for operation, so the same codes, scales, decoded values and sums.
using detail::amax8;
using detail::encode8;

template <typename T>
IRIS_AVX2 uint64_t unit_scales_avx2(const T* in, uint64_t k, uint64_t r0, uint64_t r1, uint64_t bk, uint32_t* acc, float* mul, float* scale) {
  const uint64_t units = (k + bk - 1) / bk;
  uint64_t nonfinite = 0;
  std::fill(acc, acc + units * 8, 0u);
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t j = 0; j < units; ++j) {
      __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j * 8));
      for (uint64_t c = j * bk; c < std::min(k, (j + 1) * bk); c += 8) a = amax8(detail::load8(in + r * k + c), a, nonfinite);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + j * 8), a);
    }
  for (uint64_t j = 0; j < units; ++j)
    unit_scale(detail::reduce_max_epu32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j * 8))), &mul[j], &scale[j]);
  return nonfinite;
}

template <typename T>
struct UnitValuesAvx2 : UnitWalk<T> {
  using UnitWalk<T>::UnitWalk;
  IRIS_AVX2 void operator()(detail::V16* x, detail::V16* d) {
    auto& w = *this;
    w.enter([&](uint64_t r0, uint64_t r1) { return unit_scales_avx2(w.in, w.k, r0, r1, w.bk, w.acc.data(), w.mul.data(), w.scale.data()); });
    const __m256 vm = _mm256_set1_ps(w.m), vs = _mm256_set1_ps(w.s);
    const uint64_t at = w.r * w.k + w.c;
    x[0] = detail::load16x2(w.in + at);
    d[0] = {encode8(x[0].lo, vm, vs, w.codes + at), encode8(x[0].hi, vm, vs, w.codes + at + 8)};
    w.advance();
  }
};

template <typename T>
IRIS_AVX2 uint64_t encode_sums_avx2(const T* in, uint64_t rows, uint64_t k, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                                    ErrorSums* sums) {
  UnitValuesAvx2<T> units(in, rows, k, bn, bk, codes, scales);
  detail::sum_vectors_avx2<1>(rows * k / 16, sums, units);
  return units.nonfinite;
}

#endif

using Path = detail::VectorPath;  // kBest, or one path forced (tests)

template <typename T>
uint64_t encode_sums(const T* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                     ErrorSums* sums, [[maybe_unused]] Path path = Path::kBest) {
  if (!unit_shape(g, k, &bn, &bk)) return 0;
#ifdef IRIS_X86_INTRINSICS
  const bool whole = k % 16 == 0 && bk % 16 == 0;
  if (whole && (path == Path::kBest || path == Path::kAvx512) && detail::cpu_has_avx512f())
    return encode_sums_avx512(in, rows, k, bn, bk, codes, scales, sums);
  if (whole && (path == Path::kBest || path == Path::kAvx2) && detail::cpu_has_avx2())
    return encode_sums_avx2(in, rows, k, bn, bk, codes, scales, sums);
#endif
  return encode_sums_portable(in, rows, k, bn, bk, codes, scales, sums);
}

}  // namespace

uint64_t fp8_encode_sums(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                         uint8_t* codes, float* scales, ErrorSums* sums) {
  return encode_sums(in, rows, k, g, block_n, block_k, codes, scales, sums);
}

uint64_t fp8_encode_sums_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                              uint8_t* codes, float* scales, ErrorSums* sums) {
  return encode_sums(in, rows, k, g, block_n, block_k, codes, scales, sums);
}

namespace detail {

uint64_t fp8_encode_sums_portable(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                                  uint8_t* codes, float* scales, ErrorSums* sums) {
  if (!unit_shape(g, k, &block_n, &block_k)) return 0;
  return encode_sums_portable(in, rows, k, block_n, block_k, codes, scales, sums);
}

bool fp8_encode_sums_avx2(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                          uint8_t* codes, float* scales, ErrorSums* sums, uint64_t* nonfinite) {
#ifdef IRIS_X86_INTRINSICS
  if (!cpu_has_avx2()) return false;
  *nonfinite = encode_sums(in, rows, k, g, block_n, block_k, codes, scales, sums, Path::kAvx2);
  return true;
#else
  (void)in, (void)rows, (void)k, (void)g, (void)block_n, (void)block_k, (void)codes, (void)scales, (void)sums, (void)nonfinite;
  return false;
#endif
}

}  // namespace detail

}  // namespace iris::quant
