// The error sums of error_sums_groups.h gathered 16 values at a time from AVX-512 registers:
// for encoders that produce their decoded values in registers (mxfp4_encode_sums.cpp,
// fp8_encode_sums.cpp) and add them up without a buffer pass. The same operations in the same
// order as group_sums, so the same bits. Internal to quant/*.cpp.
#pragma once

#include <algorithm>

#include "quant/avx512.h"
#include "quant/error_sums_groups.h"

#ifdef IRIS_X86_INTRINSICS
namespace iris::quant::detail {

// |x| (AVX-512F has no float "and": an integer one on the same bits).
IRIS_AVX512 inline __m512 abs16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

// The sums of one run of values, equal to add_error_sums over the run, into `into`. The run is
// produced by calls = its length / (16 V) calls of next(r, got), each giving the next V
// vectors of 16 values and their decoded values, in element order (lane l of a vector is
// element l mod 16). The loop keeps the group's and the block's lanes in registers and
// each group's values in a buffer, for the rare group summed again exactly; the operations
// are group_sums' and close_block's, in the same order (max(x, acc) keeps acc when x is NaN,
// as std::max(acc, x) does), so the bits are theirs.
template <int V, typename F>
IRIS_AVX512 inline void sum_vectors(uint64_t calls, ErrorSums* into, F&& next) {
  static_assert(V > 0 && 16 % V == 0);
  constexpr uint64_t kGroupCalls = kSumGroup / 16 / V, kBlockCalls = kSumBlock / 16 / V;
  alignas(64) float ref[kSumGroup], got[kSumGroup];
  const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
  const __m512 zero = _mm512_setzero_ps();
  for (uint64_t c = 0; c < calls;) {
    const uint64_t block_end = std::min(calls, c + kBlockCalls);
    __m512d sr0 = _mm512_setzero_pd(), sr1 = sr0, se0 = sr0, se1 = sr0;  // lanes 0-7 and 8-15 of SumLanes' sr, se
    __m512 mx = zero;
    for (; c + kGroupCalls <= block_end; c += kGroupCalls) {
      __m512 gr = zero, ge = zero, gmr = zero, gme = zero;
      for (uint64_t q = 0; q < kGroupCalls; ++q) {
        __m512 r[V], d[V];
        next(r, d);
        for (int v = 0; v < V; ++v) {
          _mm512_store_ps(ref + (q * V + v) * 16, r[v]);
          _mm512_store_ps(got + (q * V + v) * 16, d[v]);
          const __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(r[v]), exp_mask), exp_mask);
          const __m512 rf = _mm512_maskz_mov_ps(finite, r[v]);
          const __m512 e = _mm512_maskz_mov_ps(finite, _mm512_sub_ps(d[v], r[v]));
          gr = _mm512_add_ps(gr, _mm512_mul_ps(rf, rf));
          ge = _mm512_add_ps(ge, _mm512_mul_ps(e, e));
          gmr = _mm512_max_ps(abs16(rf), gmr);
          gme = _mm512_max_ps(abs16(e), gme);
        }
      }
      mx = _mm512_max_ps(gme, mx);  // std::max(mx, gme): gme is never NaN
      // group_out_of_range, lane by lane: !(gmr <= big && gme <= big) || (0 < gmr < small) || (0 < gme < small)
      const __m512 big = _mm512_set1_ps(kSumBig), small = _mm512_set1_ps(kSumSmall);
      const __mmask16 in_range = _mm512_cmp_ps_mask(gmr, big, _CMP_LE_OQ) & _mm512_cmp_ps_mask(gme, big, _CMP_LE_OQ);
      const __mmask16 tiny = (_mm512_cmp_ps_mask(gmr, small, _CMP_LT_OQ) & _mm512_cmp_ps_mask(gmr, zero, _CMP_NEQ_OQ)) |
                             (_mm512_cmp_ps_mask(gme, small, _CMP_LT_OQ) & _mm512_cmp_ps_mask(gme, zero, _CMP_NEQ_OQ));
      if (in_range != 0xffff || tiny) {
        alignas(64) double sr[16], se[16];
        _mm512_store_pd(sr, sr0);
        _mm512_store_pd(sr + 8, sr1);
        _mm512_store_pd(se, se0);
        _mm512_store_pd(se + 8, se1);
        exact_sums(ref, got, kSumGroup, sr, se, nullptr);
        sr0 = _mm512_load_pd(sr);
        sr1 = _mm512_load_pd(sr + 8);
        se0 = _mm512_load_pd(se);
        se1 = _mm512_load_pd(se + 8);
        continue;
      }
      sr0 = _mm512_add_pd(sr0, _mm512_cvtps_pd(_mm512_castps512_ps256(gr)));
      sr1 = _mm512_add_pd(sr1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(gr), 1))));
      se0 = _mm512_add_pd(se0, _mm512_cvtps_pd(_mm512_castps512_ps256(ge)));
      se1 = _mm512_add_pd(se1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ge), 1))));
    }
    uint64_t tail = 0;  // the block's last values (< a group): summed exactly
    for (; c < block_end; ++c) {
      __m512 r[V], d[V];
      next(r, d);
      for (int v = 0; v < V; ++v, tail += 16) {
        _mm512_store_ps(ref + tail, r[v]);
        _mm512_store_ps(got + tail, d[v]);
      }
    }
    SumLanes lanes;
    _mm512_storeu_pd(lanes.sr, sr0);
    _mm512_storeu_pd(lanes.sr + 8, sr1);
    _mm512_storeu_pd(lanes.se, se0);
    _mm512_storeu_pd(lanes.se + 8, se1);
    _mm512_storeu_ps(lanes.mx, mx);
    exact_sums(ref, got, tail, lanes.sr, lanes.se, lanes.mx);
    close_block(lanes, into);
  }
}

}  // namespace iris::quant::detail
#endif
