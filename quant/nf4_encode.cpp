// Fast NF4 double-quant encoding: the oracle's rules (nf4_ref.cpp) in loops the compiler
// vectorises. First level (nearly all the work): 64-element blocks in parallel, absmax as an
// integer max, codes by nf4_encode_fast (threshold counting). Second level (one value per 64
// inputs): nested blocks in parallel, codes by dynamic_map_encode_fast (gathers).
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "common/parallel_for.h"
#include "quant/nf4.h"
#include "quant/avx2.h"
#include "quant/avx512.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

constexpr uint64_t kBlock = 64, kNested = 256;

// bnb's block absmax: max(init, |x_i|) with fmaxf, so NaN is ignored; init is -FLT_MAX for
// a full block and 0 for a short one (its padding zeros count). As unsigned maxima over |x|
// bits with NaN mapped to 0 (order-free and vectorisable); -FLT_MAX only survives when every
// element of a full block is NaN.
IRIS_INLINE float absmax64(const float* v, uint64_t count) {
  uint32_t amax = 0, any_number = 0;
  for (int i = 0; i < 64; ++i) {
    const uint32_t a = f32_bits(v[i]) & 0x7fffffffu;
    amax = std::max(amax, detail::abs_bits_no_nan(v[i]));
    any_number = std::max(any_number, uint32_t(a <= 0x7f800000u));
  }
  return count == kBlock && !any_number ? -FLT_MAX : f32_from_bits(amax);
}

// One block (count <= 64 values, zero padded in v): codes into out[0, (count+1)/2).
IRIS_INLINE void block_codes(const float* v, uint64_t count, float absmax, uint8_t* out) {
  const float inv = 1.0f / absmax;
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 64; ++i) c[i] = nf4_encode_fast(v[i] * inv);
  if (count == kBlock) {
    for (int j = 0; j < 32; ++j) out[j] = detail::pack_high_first(detail::load_pair(c + 2 * j));
  } else {
    for (uint64_t j = 0; j < (count + 1) / 2; ++j) out[j] = detail::pack_high_first(detail::load_pair(c + 2 * j));
  }
}

#ifdef IRIS_X86_INTRINSICS
// block_codes for a whole block (64 values) with AVX-512: nf4_encode_fast's count of the
// thresholds that v * inv exceeds, found by a 4-step binary search over the sorted
// thresholds (each step a permute that looks the threshold up, a compare and a masked add)
// instead of 15 compares. The same strict '>' on the same products, so the same codes (NaN
// exceeds none: code 0).
IRIS_AVX512 void block_codes_avx512(const float* v, float absmax, uint8_t* out) {
  alignas(64) float t[16];
  for (int i = 0; i < 15; ++i) t[i] = nf4_threshold(i);
  t[15] = 0.f;  // never looked up: the search's indices stay below 15
  const __m512 thresholds = _mm512_load_ps(t), inv = _mm512_set1_ps(1.0f / absmax);
  const __m512i low8 = _mm512_set1_epi64(0xff);
  for (int q = 0; q < 4; ++q) {
    const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(v + 16 * q), inv);
    __m512i c = _mm512_setzero_si512();
    for (int step : {8, 4, 2, 1}) {
      const __m512i probe = _mm512_add_epi32(c, _mm512_set1_epi32(step - 1));
      const __mmask16 above = _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(probe, thresholds), _CMP_GT_OQ);
      c = _mm512_mask_add_epi32(c, above, c, _mm512_set1_epi32(step));
    }
    // Lanes 2j, 2j+1 as one 64-bit lane: byte j = code(2j) << 4 | code(2j+1) (high first).
    const __m512i packed = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(c, low8), 4), _mm512_srli_epi64(c, 32));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 8 * q), _mm512_cvtepi64_epi8(packed));
  }
}
#endif

#ifdef IRIS_X86_INTRINSICS
// A binary search's step on 8 lanes: c + by where `above` (a comparison's all-ones mask) is set.
// For by = 1 the callers subtract the mask (-1) instead: one operation fewer, the same sum.
IRIS_AVX2 inline __m256i add_where(__m256i c, __m256 above, int by) {
  return _mm256_add_epi32(c, _mm256_and_si256(_mm256_castps_si256(above), _mm256_set1_epi32(by)));
}

// block_codes_avx512 on AVX2, 8 values a vector: the same 4-step binary search and the same
// strict '>' on the same products, so the same codes. Each step's candidate thresholds are
// few, so each is looked up in a table of just those: step 8 compares with t[7] alone, step 4
// picks t[3] or t[11] by step 8's mask, steps 2 and 1 permute within [t1, t5, t9, t13] and
// [t0, t2, ..., t14] by c / 4 and c / 2. 16 operations a vector where a lookup of t[c + step - 1]
// in two 8-entry halves took 32 (the compiler's AVX2 clone of block_codes, 15 compares a value,
// ran at 44% of the AVX-512 path's speed).
template <typename T>
IRIS_AVX2 void block_codes_avx2(const T* v, float absmax, uint8_t* out) {
  alignas(32) float by4[8] = {nf4_threshold(1), nf4_threshold(5), nf4_threshold(9), nf4_threshold(13), 0.f, 0.f, 0.f, 0.f};
  alignas(32) float by2[8];
  for (int i = 0; i < 8; ++i) by2[i] = nf4_threshold(2 * i);
  const __m256 t7 = _mm256_set1_ps(nf4_threshold(7)), t3 = _mm256_set1_ps(nf4_threshold(3)), t11 = _mm256_set1_ps(nf4_threshold(11));
  const __m256 table4 = _mm256_load_ps(by4), table2 = _mm256_load_ps(by2), inv = _mm256_set1_ps(1.0f / absmax);
  __m256i c[8];
  for (int q = 0; q < 8; ++q) {
    const __m256 x = _mm256_mul_ps(detail::load8(v + 8 * q), inv);
    const __m256 above8 = _mm256_cmp_ps(x, t7, _CMP_GT_OQ);
    c[q] = add_where(_mm256_setzero_si256(), above8, 8);
    c[q] = add_where(c[q], _mm256_cmp_ps(x, _mm256_blendv_ps(t3, t11, above8), _CMP_GT_OQ), 4);
    c[q] = add_where(c[q], _mm256_cmp_ps(x, _mm256_permutevar8x32_ps(table4, _mm256_srli_epi32(c[q], 2)), _CMP_GT_OQ), 2);
    const __m256 above1 = _mm256_cmp_ps(x, _mm256_permutevar8x32_ps(table2, _mm256_srli_epi32(c[q], 1)), _CMP_GT_OQ);
    c[q] = _mm256_sub_epi32(c[q], _mm256_castps_si256(above1));
  }
  // The 64 codes (0..15 in 32-bit lanes) narrowed to bytes in element order: the packs work
  // within 128-bit halves, so each 32-byte result holds 4-byte runs of four vectors, which
  // one permute of 32-bit runs returns to element order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i bytes[2];
  for (int h = 0; h < 2; ++h) {
    const __m256i w01 = _mm256_packus_epi32(c[4 * h], c[4 * h + 1]), w23 = _mm256_packus_epi32(c[4 * h + 2], c[4 * h + 3]);
    bytes[h] = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
  }
  // Byte pairs (code 2j, code 2j+1) read as 16-bit w = c0 | c1 << 8 -> c0 << 4 | c1 (high
  // first), then narrowed once more; the pack's halves are put back in order by 64-bit runs.
  const __m256i low8 = _mm256_set1_epi16(0xff);
  __m256i pairs[2];
  for (int h = 0; h < 2; ++h) pairs[h] = _mm256_and_si256(_mm256_or_si256(_mm256_slli_epi16(bytes[h], 4), _mm256_srli_epi16(bytes[h], 8)), low8);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs[0], pairs[1]), 0xD8);  // 64-bit runs 0, 2, 1, 3
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
}

// absmax64 of a whole block on AVX2, from FP32 or BF16 values: the same unsigned maximum of
// the |x| bits with NaN as 0, and -FLT_MAX for a block of NaN only. The compiler's AVX2
// compilation of absmax64 (with the block's copy into FP32) took six times the AVX-512 one's
// time in an NF4 conversion (perf).
template <typename T>
IRIS_AVX2 float absmax64_avx2(const T* v) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i amax = _mm256_setzero_si256(), all_nan = _mm256_set1_epi32(-1);
  for (int q = 0; q < 8; ++q) {
    const __m256i a = _mm256_and_si256(_mm256_castps_si256(detail::load8(v + 8 * q)), abs_mask);
    const __m256i nan = _mm256_cmpgt_epi32(a, inf);  // a <= 0x7fffffff: the signed compare is the unsigned one
    amax = _mm256_max_epi32(amax, _mm256_andnot_si256(nan, a));
    all_nan = _mm256_and_si256(all_nan, nan);
  }
  return _mm256_movemask_ps(_mm256_castsi256_ps(all_nan)) == 0xff ? -FLT_MAX : f32_from_bits(detail::reduce_max_epu32(amax));
}
#endif

// Loads block b (of the n-element tensor whose elements [i0, ...) are at x) into v.
template <typename T>
IRIS_INLINE uint64_t load_block(const T* x, uint64_t i0, uint64_t n, uint64_t b, float* v) {
  const uint64_t start = b * kBlock, count = start + kBlock <= n ? kBlock : n - start;
  const T* src = x + (start - i0);
  if (count == kBlock) {
    for (int j = 0; j < 64; ++j) v[j] = detail::load_f32(src[j]);
  } else {
    for (uint64_t j = 0; j < 64; ++j) v[j] = j < count ? detail::load_f32(src[j]) : 0.0f;
  }
  return count;
}

// Blocks [b0, b1): the absmax (into computed[b], or read from given[b]) and, when `codes` is
// set, the codes (at codes[(b*64 - i0)/2]).
template <typename T>
IRIS_INLINE void first_level_body(const T* x, uint64_t i0, uint64_t n, uint64_t b0, uint64_t b1, const float* given, float* computed,
                               uint8_t* codes) {
  alignas(64) float v[64];
#ifdef IRIS_X86_INTRINSICS
  const bool avx512 = codes && detail::cpu_has_avx512f();
#endif
  for (uint64_t b = b0; b < b1; ++b) {
    const uint64_t count = load_block(x, i0, n, b, v);
    const float absmax = given ? given[b] : absmax64(v, count);
    if (computed) computed[b] = absmax;
    if (!codes) continue;
    uint8_t* out = codes + (b * kBlock - i0) / 2;
#ifdef IRIS_X86_INTRINSICS
    if (avx512 && count == kBlock) {
      block_codes_avx512(v, absmax, out);
      continue;
    }
#endif
    block_codes(v, count, absmax, out);
  }
}
#ifdef IRIS_X86_INTRINSICS
// first_level on AVX2: each whole block read where it lies (absmax64_avx2, block_codes_avx2),
// a partial last block by the body.
template <typename T>
IRIS_AVX2 void first_level_avx2(const T* x, uint64_t i0, uint64_t n, uint64_t b0, uint64_t b1, const float* given, float* computed,
                                uint8_t* codes) {
  uint64_t b = b0;
  for (; b < b1 && (b + 1) * kBlock <= n; ++b) {
    const T* src = x + (b * kBlock - i0);
    const float absmax = given ? given[b] : absmax64_avx2(src);
    if (computed) computed[b] = absmax;
    if (codes) block_codes_avx2(src, absmax, codes + (b * kBlock - i0) / 2);
  }
  if (b < b1) first_level_body(x, i0, n, b, b1, given, computed, codes);
}
#endif
IRIS_HOT_LOOP_CLONES_AVX2_BY_HAND((template <typename T>), (<T>), void, first_level,
                                  (const T* x, uint64_t i0, uint64_t n, uint64_t b0, uint64_t b1, const float* given, float* computed,
                                   uint8_t* codes),
                                  (x, i0, n, b0, b1, given, computed, codes))

// Runs first_level over the blocks of [i0, i0 + count) in parallel chunks.
template <typename T>
void first_level_parallel(const T* x, uint64_t i0, uint64_t count, uint64_t n, const float* given, float* computed, uint8_t* codes) {
  const uint64_t b0 = i0 / kBlock, b1 = (i0 + count + kBlock - 1) / kBlock, chunk = 256;
  const int64_t chunks = int64_t((b1 - b0 + chunk - 1) / chunk);
  parallel_for(chunks, 2, [&](int64_t c) {  // a chunk: 16K values
    const uint64_t s = b0 + uint64_t(c) * chunk, e = s + chunk < b1 ? s + chunk : b1;
    first_level(x, i0, n, s, e, given, computed, codes);
  });
}

// Second level: the dynamic-map codes of absmax[a0, a1), a1 - a0 <= 256. Map and codes are
// local arrays of different types, so the compiler sees that the gathers from the map do
// not alias the stores and vectorises.
IRIS_INLINE void nested_codes_body(const float* absmax, uint64_t a0, uint64_t a1, float offset, float inv, uint8_t* codes) {
  float map[256];
  uint32_t q[kNested];
  for (int i = 0; i < 256; ++i) map[i] = dynamic_map_value(uint8_t(i));
  const uint32_t count = uint32_t(a1 - a0);
  for (uint32_t a = 0; a < count; ++a) q[a] = dynamic_map_encode_fast((absmax[a0 + a] - offset) * inv, map);
  for (uint32_t a = 0; a < count; ++a) codes[a0 + a] = uint8_t(q[a]);
}
#ifdef IRIS_X86_INTRINSICS
// The dynamic map and, for nested_codes_avx2's first steps, the entries each step can compare
// with: built once (constants), not at every group of 256 values.
struct DynamicMapTables {
  alignas(32) float map[256];
  alignas(32) float by64[8] = {};  // map[31 + 64k], k < 4
  alignas(32) float by32[8];       // map[15 + 32k]
  alignas(32) float by16[16];      // map[7 + 16k]
  DynamicMapTables() {
    for (int i = 0; i < 256; ++i) map[i] = dynamic_map_value(uint8_t(i));
    for (int k = 0; k < 4; ++k) by64[k] = map[31 + 64 * k];
    for (int k = 0; k < 8; ++k) by32[k] = map[15 + 32 * k];
    for (int k = 0; k < 16; ++k) by16[k] = map[7 + 16 * k];
  }
};

// nested_codes on AVX2, 8 values a vector: dynamic_map_encode_fast's binary search (c = the
// number of odd entries map[2i + 1] below x) with its first five steps' candidates looked up
// among those alone -- map[127]; map[63] or map[191]; a permute among map[31 + 64k], among
// map[15 + 32k], and two among map[7 + 16k] -- and only the last two steps and the final
// neighbours gathered: 5 gathers a vector where the compiler's AVX2 loop took 10 (4x the
// AVX-512 clone's time in an NF4 conversion, perf). The same comparisons of the same values,
// so the same codes.
IRIS_AVX2 void nested_codes_avx2(const float* absmax, uint64_t a0, uint64_t a1, float offset, float inv, uint8_t* codes) {
  static const DynamicMapTables tables;
  const float* map = tables.map;
  const __m256 m127 = _mm256_set1_ps(map[127]), m63 = _mm256_set1_ps(map[63]), m191 = _mm256_set1_ps(map[191]);
  const __m256 t64 = _mm256_load_ps(tables.by64), t32 = _mm256_load_ps(tables.by32);
  const __m256 t16lo = _mm256_load_ps(tables.by16), t16hi = _mm256_load_ps(tables.by16 + 8);
  const __m256 off = _mm256_set1_ps(offset), scale = _mm256_set1_ps(inv), half = _mm256_set1_ps(0.5f);
  const __m256i one = _mm256_set1_epi32(1), seven = _mm256_set1_epi32(7);
  uint64_t a = a0;
  for (; a + 8 <= a1; a += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(absmax + a), off), scale);
    const __m256 above64 = _mm256_cmp_ps(x, m127, _CMP_GT_OQ);
    __m256i c = add_where(_mm256_setzero_si256(), above64, 64);
    c = add_where(c, _mm256_cmp_ps(x, _mm256_blendv_ps(m63, m191, above64), _CMP_GT_OQ), 32);
    c = add_where(c, _mm256_cmp_ps(x, _mm256_permutevar8x32_ps(t64, _mm256_srli_epi32(c, 5)), _CMP_GT_OQ), 16);
    c = add_where(c, _mm256_cmp_ps(x, _mm256_permutevar8x32_ps(t32, _mm256_srli_epi32(c, 4)), _CMP_GT_OQ), 8);
    const __m256i k = _mm256_srli_epi32(c, 3);  // 0..15: map[7 + 16k]
    const __m256 t4 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t16lo, k), _mm256_permutevar8x32_ps(t16hi, k),
                                       _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, seven)));
    c = add_where(c, _mm256_cmp_ps(x, t4, _CMP_GT_OQ), 4);
    c = add_where(c, _mm256_cmp_ps(x, _mm256_i32gather_ps(map, _mm256_add_epi32(_mm256_add_epi32(c, c), _mm256_set1_epi32(3)), 4), _CMP_GT_OQ), 2);
    c = _mm256_sub_epi32(c, _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_i32gather_ps(map, _mm256_add_epi32(_mm256_add_epi32(c, c), one), 4), _CMP_GT_OQ)));
    const __m256i pivot = _mm256_add_epi32(c, c), upper = _mm256_add_epi32(pivot, one);
    const __m256i lower = _mm256_sub_epi32(pivot, _mm256_andnot_si256(_mm256_cmpeq_epi32(c, _mm256_setzero_si256()), one));
    const __m256 val = _mm256_i32gather_ps(map, pivot, 4);
    const __m256 mid_upper = _mm256_mul_ps(_mm256_add_ps(_mm256_i32gather_ps(map, upper, 4), val), half);
    const __m256 mid_lower = _mm256_mul_ps(_mm256_add_ps(_mm256_i32gather_ps(map, lower, 4), val), half);
    const __m256i up = _mm256_blendv_epi8(pivot, upper, _mm256_castps_si256(_mm256_cmp_ps(x, mid_upper, _CMP_GT_OQ)));
    const __m256i down = _mm256_blendv_epi8(pivot, lower, _mm256_castps_si256(_mm256_cmp_ps(x, mid_lower, _CMP_LT_OQ)));
    const __m256i code = _mm256_blendv_epi8(down, up, _mm256_castps_si256(_mm256_cmp_ps(x, val, _CMP_GT_OQ)));
    // 0..255 in 32-bit lanes -> 8 bytes: the packs work within 128-bit halves (bytes 0-3 of
    // each half), put side by side by one permute.
    const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(code, code), _mm256_setzero_si256());
    const __m256i joined = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + a), _mm256_castsi256_si128(joined));
  }
  for (; a < a1; ++a) codes[a] = dynamic_map_encode_fast((absmax[a] - offset) * inv, map);
}
#endif

IRIS_HOT_LOOP_CLONES_AVX2_BY_HAND((), (), void, nested_codes,
                                  (const float* absmax, uint64_t a0, uint64_t a1, float offset, float inv, uint8_t* codes),
                                  (absmax, a0, a1, offset, inv, codes))

template <typename T>
void encode_dq(const T* in, uint64_t n, Nf4DoubleQuant* out) {
  std::vector<float> absmax((n + kBlock - 1) / kBlock);
  out->codes.resize((n + 1) / 2);  // every byte is written below: no need to zero it
  first_level_parallel(in, 0, n, n, nullptr, absmax.data(), out->codes.data());
  nf4_quantize_absmax(absmax.data(), absmax.size(), out);
}

}  // namespace

double nf4_absmax_sum(const float* absmax, uint64_t count, double running) {
  for (uint64_t b = 0; b < count; ++b) running += absmax[b];  // in order: torch.mean's bits (nf4.h)
  return running;
}

float nf4_offset_from_sum(double sum, uint64_t nabs) { return nabs ? float(sum / double(nabs)) : 0.0f; }

void nf4_quantize_absmax_groups(const float* absmax, uint64_t g0, uint64_t g1, uint64_t nabs, float offset, uint8_t* absmax_codes,
                                float* nested_absmax) {
  parallel_for(int64_t(g1 - g0), int64_t(kGrainValues / kNested), [&](int64_t jj) {
    const uint64_t j = g0 + uint64_t(jj);
    const uint64_t a0 = j * kNested, a1 = a0 + kNested < nabs ? a0 + kNested : nabs;
    float m = a1 - a0 == kNested ? -FLT_MAX : 0.0f;
    for (uint64_t a = a0; a < a1; ++a) {
      const float ad = f32_from_bits(f32_bits(absmax[a] - offset) & 0x7fffffffu);  // |.|, +0 for -0 like fabsf
      m = ad > m ? ad : m;
    }
    nested_absmax[j] = m;
    const float inv = 1.0f / m;
    nested_codes(absmax, a0, a1, offset, inv, absmax_codes);
  });
}

void nf4_quantize_absmax(const float* absmax, uint64_t nabs, Nf4DoubleQuant* out) {
  const uint64_t nnest = (nabs + kNested - 1) / kNested;
  const float offset = nf4_offset_from_sum(nf4_absmax_sum(absmax, nabs, 0.0), nabs);  // torch.mean, by a double sum
  out->offset = offset;
  out->absmax_codes.resize(nabs);  // every element is written below
  out->nested_absmax.resize(nnest);
  nf4_quantize_absmax_groups(absmax, 0, nnest, nabs, offset, out->absmax_codes.data(), out->nested_absmax.data());
}

void nf4_encode_dq(const float* in, uint64_t n, Nf4DoubleQuant* out) { encode_dq(in, n, out); }
void nf4_encode_dq_bf16(const uint16_t* in, uint64_t n, Nf4DoubleQuant* out) { encode_dq(in, n, out); }

void nf4_block_absmax(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax) {
  first_level_parallel(chunk, i0, count, n, nullptr, absmax, nullptr);
}

void nf4_block_absmax_bf16(const uint16_t* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax) {
  first_level_parallel(chunk, i0, count, n, nullptr, absmax, nullptr);
}

void nf4_encode_codes(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, const float* absmax, uint8_t* codes) {
  first_level_parallel(chunk, i0, count, n, absmax, nullptr, codes);
}

void nf4_encode_first_level(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax, uint8_t* codes) {
  first_level_parallel(chunk, i0, count, n, nullptr, absmax, codes);
}

}  // namespace iris::quant
