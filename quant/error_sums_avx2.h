// error_sums_avx512.h's sum_vectors on AVX2: the same 16 float lanes (two halves of 8) and 16
// double lanes (four quarters of 4), the same operations in the same order, so the same bits
// (group_sums and close_block of error_sums_groups.h define them). Internal to quant/*.cpp.
#pragma once

#include <algorithm>

#include "quant/avx2.h"
#include "quant/error_sums_groups.h"

#ifdef IRIS_X86_INTRINSICS
namespace iris::quant::detail {

// 16 double lanes as four quarters.
struct D16 {
  __m256d q[4];
};

IRIS_AVX2 inline void add_widened(D16& acc, const V16& x) {
  acc.q[0] = _mm256_add_pd(acc.q[0], _mm256_cvtps_pd(_mm256_castps256_ps128(x.lo)));
  acc.q[1] = _mm256_add_pd(acc.q[1], _mm256_cvtps_pd(_mm256_extractf128_ps(x.lo, 1)));
  acc.q[2] = _mm256_add_pd(acc.q[2], _mm256_cvtps_pd(_mm256_castps256_ps128(x.hi)));
  acc.q[3] = _mm256_add_pd(acc.q[3], _mm256_cvtps_pd(_mm256_extractf128_ps(x.hi, 1)));
}
IRIS_AVX2 inline void store16(double* out, const D16& x) {
  for (int i = 0; i < 4; ++i) _mm256_storeu_pd(out + 4 * i, x.q[i]);
}
IRIS_AVX2 inline D16 load16d(const double* in) {
  D16 x;
  for (int i = 0; i < 4; ++i) x.q[i] = _mm256_loadu_pd(in + 4 * i);
  return x;
}

// Bit i of the result: lane i of the 16 (lo lanes 0-7, hi lanes 8-15).
IRIS_AVX2 inline unsigned mask16(__m256 lo, __m256 hi) { return unsigned(_mm256_movemask_ps(lo)) | unsigned(_mm256_movemask_ps(hi)) << 8; }

// As error_sums_avx512.h's sum_vectors: next(r, d) gives the next V pairs of 16 values.
template <int V, typename F>
IRIS_AVX2 inline void sum_vectors_avx2(uint64_t calls, ErrorSums* into, F&& next) {
  static_assert(V > 0 && 16 % V == 0);
  constexpr uint64_t kGroupCalls = kSumGroup / 16 / V, kBlockCalls = kSumBlock / 16 / V;
  alignas(32) float ref[kSumGroup], got[kSumGroup];
  const __m256 zero = _mm256_setzero_ps();
  const __m256 big = _mm256_set1_ps(kSumBig), small = _mm256_set1_ps(kSumSmall);
  for (uint64_t c = 0; c < calls;) {
    const uint64_t block_end = std::min(calls, c + kBlockCalls);
    D16 sr{{_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}}, se = sr;
    V16 mx{zero, zero};
    for (; c + kGroupCalls <= block_end; c += kGroupCalls) {
      V16 gr{zero, zero}, ge = gr, gmr = gr, gme = gr;
      for (uint64_t q = 0; q < kGroupCalls; ++q) {
        V16 r[V], d[V];
        next(r, d);
        for (int v = 0; v < V; ++v) {
          float* rp = ref + (q * V + v) * 16;
          float* dp = got + (q * V + v) * 16;
          _mm256_store_ps(rp, r[v].lo);
          _mm256_store_ps(rp + 8, r[v].hi);
          _mm256_store_ps(dp, d[v].lo);
          _mm256_store_ps(dp + 8, d[v].hi);
          const __m256 rf[2] = {zero_nonfinite(r[v].lo, r[v].lo), zero_nonfinite(r[v].hi, r[v].hi)};
          const __m256 e[2] = {zero_nonfinite(_mm256_sub_ps(d[v].lo, r[v].lo), r[v].lo), zero_nonfinite(_mm256_sub_ps(d[v].hi, r[v].hi), r[v].hi)};
          gr.lo = _mm256_add_ps(gr.lo, _mm256_mul_ps(rf[0], rf[0]));
          gr.hi = _mm256_add_ps(gr.hi, _mm256_mul_ps(rf[1], rf[1]));
          ge.lo = _mm256_add_ps(ge.lo, _mm256_mul_ps(e[0], e[0]));
          ge.hi = _mm256_add_ps(ge.hi, _mm256_mul_ps(e[1], e[1]));
          gmr.lo = _mm256_max_ps(abs8(rf[0]), gmr.lo);
          gmr.hi = _mm256_max_ps(abs8(rf[1]), gmr.hi);
          gme.lo = _mm256_max_ps(abs8(e[0]), gme.lo);
          gme.hi = _mm256_max_ps(abs8(e[1]), gme.hi);
        }
      }
      mx.lo = _mm256_max_ps(gme.lo, mx.lo);
      mx.hi = _mm256_max_ps(gme.hi, mx.hi);
      const unsigned in_range = mask16(_mm256_cmp_ps(gmr.lo, big, _CMP_LE_OQ), _mm256_cmp_ps(gmr.hi, big, _CMP_LE_OQ)) &
                                mask16(_mm256_cmp_ps(gme.lo, big, _CMP_LE_OQ), _mm256_cmp_ps(gme.hi, big, _CMP_LE_OQ));
      const unsigned tiny = (mask16(_mm256_cmp_ps(gmr.lo, small, _CMP_LT_OQ), _mm256_cmp_ps(gmr.hi, small, _CMP_LT_OQ)) &
                             mask16(_mm256_cmp_ps(gmr.lo, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(gmr.hi, zero, _CMP_NEQ_OQ))) |
                            (mask16(_mm256_cmp_ps(gme.lo, small, _CMP_LT_OQ), _mm256_cmp_ps(gme.hi, small, _CMP_LT_OQ)) &
                             mask16(_mm256_cmp_ps(gme.lo, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(gme.hi, zero, _CMP_NEQ_OQ)));
      if (in_range != 0xffffu || tiny) {
        alignas(32) double srd[16], sed[16];
        store16(srd, sr);
        store16(sed, se);
        exact_sums(ref, got, kSumGroup, srd, sed, nullptr);
        sr = load16d(srd);
        se = load16d(sed);
        continue;
      }
      add_widened(sr, gr);
      add_widened(se, ge);
    }
    uint64_t tail = 0;  // the block's last values (< a group): summed exactly
    for (; c < block_end; ++c) {
      V16 r[V], d[V];
      next(r, d);
      for (int v = 0; v < V; ++v, tail += 16) {
        _mm256_store_ps(ref + tail, r[v].lo);
        _mm256_store_ps(ref + tail + 8, r[v].hi);
        _mm256_store_ps(got + tail, d[v].lo);
        _mm256_store_ps(got + tail + 8, d[v].hi);
      }
    }
    SumLanes lanes;
    store16(lanes.sr, sr);
    store16(lanes.se, se);
    _mm256_storeu_ps(lanes.mx, mx.lo);
    _mm256_storeu_ps(lanes.mx + 8, mx.hi);
    exact_sums(ref, got, tail, lanes.sr, lanes.se, lanes.mx);
    close_block(lanes, into);
  }
}

}  // namespace iris::quant::detail
#endif
