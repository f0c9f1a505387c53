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

// A group's float lanes (group_sums of error_sums_groups.h on two 8-lane halves).
struct GroupLanesAvx2 {
  V16 gr, ge, gmr, gme;
};
IRIS_AVX2 inline GroupLanesAvx2 group_lanes_zero() {
  const __m256 z = _mm256_setzero_ps();
  return {{z, z}, {z, z}, {z, z}, {z, z}};
}

// One step of a group: 16 values r and their decodes d, non-finite sources left out.
IRIS_AVX2 inline void group_step(GroupLanesAvx2& g, const V16& r, const V16& d) {
  const __m256 rf[2] = {zero_nonfinite(r.lo, r.lo), zero_nonfinite(r.hi, r.hi)};
  const __m256 e[2] = {zero_nonfinite(_mm256_sub_ps(d.lo, r.lo), r.lo), zero_nonfinite(_mm256_sub_ps(d.hi, r.hi), r.hi)};
  g.gr.lo = _mm256_add_ps(g.gr.lo, _mm256_mul_ps(rf[0], rf[0]));
  g.gr.hi = _mm256_add_ps(g.gr.hi, _mm256_mul_ps(rf[1], rf[1]));
  g.ge.lo = _mm256_add_ps(g.ge.lo, _mm256_mul_ps(e[0], e[0]));
  g.ge.hi = _mm256_add_ps(g.ge.hi, _mm256_mul_ps(e[1], e[1]));
  g.gmr.lo = _mm256_max_ps(abs8(rf[0]), g.gmr.lo);
  g.gmr.hi = _mm256_max_ps(abs8(rf[1]), g.gmr.hi);
  g.gme.lo = _mm256_max_ps(abs8(e[0]), g.gme.lo);
  g.gme.hi = _mm256_max_ps(abs8(e[1]), g.gme.hi);
}

// A finished group into the block's lanes: its largest error into mx, and its float sums into
// the double lanes sr, se, unless a lane left float's safe range; then false, and the caller
// sums the group again exactly (exact_sums), as group_sums does.
IRIS_AVX2 inline bool group_close(const GroupLanesAvx2& g, D16& sr, D16& se, V16& mx) {
  const __m256 zero = _mm256_setzero_ps(), big = _mm256_set1_ps(kSumBig), small = _mm256_set1_ps(kSumSmall);
  mx.lo = _mm256_max_ps(g.gme.lo, mx.lo);
  mx.hi = _mm256_max_ps(g.gme.hi, mx.hi);
  const unsigned in_range = mask16(_mm256_cmp_ps(g.gmr.lo, big, _CMP_LE_OQ), _mm256_cmp_ps(g.gmr.hi, big, _CMP_LE_OQ)) &
                            mask16(_mm256_cmp_ps(g.gme.lo, big, _CMP_LE_OQ), _mm256_cmp_ps(g.gme.hi, big, _CMP_LE_OQ));
  const unsigned tiny = (mask16(_mm256_cmp_ps(g.gmr.lo, small, _CMP_LT_OQ), _mm256_cmp_ps(g.gmr.hi, small, _CMP_LT_OQ)) &
                         mask16(_mm256_cmp_ps(g.gmr.lo, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(g.gmr.hi, zero, _CMP_NEQ_OQ))) |
                        (mask16(_mm256_cmp_ps(g.gme.lo, small, _CMP_LT_OQ), _mm256_cmp_ps(g.gme.hi, small, _CMP_LT_OQ)) &
                         mask16(_mm256_cmp_ps(g.gme.lo, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(g.gme.hi, zero, _CMP_NEQ_OQ)));
  if (in_range != 0xffffu || tiny) return false;
  add_widened(sr, g.gr);
  add_widened(se, g.ge);
  return true;
}

// The group [ref, ref + kSumGroup) summed exactly into the double lanes (a group_close that
// returned false).
IRIS_AVX2 inline void group_redo(const float* ref, const float* got, D16& sr, D16& se) {
  alignas(32) double srd[16], sed[16];
  store16(srd, sr);
  store16(sed, se);
  exact_sums(ref, got, kSumGroup, srd, sed, nullptr);
  sr = load16d(srd);
  se = load16d(sed);
}

// The block's lanes, with `tail` values after its groups summed exactly, into the total.
IRIS_AVX2 inline void block_close(const D16& sr, const D16& se, const V16& mx, const float* ref, const float* got, uint64_t tail,
                                  ErrorSums* into) {
  SumLanes lanes;
  store16(lanes.sr, sr);
  store16(lanes.se, se);
  _mm256_storeu_ps(lanes.mx, mx.lo);
  _mm256_storeu_ps(lanes.mx + 8, mx.hi);
  exact_sums(ref, got, tail, lanes.sr, lanes.se, lanes.mx);
  close_block(lanes, into);
}

IRIS_AVX2 inline D16 d16_zero() { return {{_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}}; }

// As error_sums_avx512.h's sum_vectors: next(r, d) gives the next V pairs of 16 values.
template <int V, typename F>
IRIS_AVX2 inline void sum_vectors_avx2(uint64_t calls, ErrorSums* into, F&& next) {
  static_assert(V > 0 && 16 % V == 0);
  constexpr uint64_t kGroupCalls = kSumGroup / 16 / V, kBlockCalls = kSumBlock / 16 / V;
  alignas(32) float ref[kSumGroup], got[kSumGroup];
  const __m256 zero = _mm256_setzero_ps();
  for (uint64_t c = 0; c < calls;) {
    const uint64_t block_end = std::min(calls, c + kBlockCalls);
    D16 sr = d16_zero(), se = d16_zero();
    V16 mx{zero, zero};
    for (; c + kGroupCalls <= block_end; c += kGroupCalls) {
      GroupLanesAvx2 g = group_lanes_zero();
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
          group_step(g, r[v], d[v]);
        }
      }
      if (!group_close(g, sr, se, mx)) group_redo(ref, got, sr, se);
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
    block_close(sr, se, mx, ref, got, tail, into);
  }
}

// add_error_sums' block (at most kSumBlock values in memory): group_sums and close_block on
// 8-lane halves, the same bits. The compiler's AVX2 clone of block_sums stayed scalar (3.5x
// the AVX-512 clone's time in an NF4 conversion, perf).
IRIS_AVX2 inline void block_sums_avx2(const float* ref, const float* got, uint64_t n, ErrorSums* into) {
  const __m256 zero = _mm256_setzero_ps();
  D16 sr = d16_zero(), se = d16_zero();
  V16 mx{zero, zero};
  uint64_t i = 0;
  for (; i + kSumGroup <= n; i += kSumGroup) {
    GroupLanesAvx2 g = group_lanes_zero();
    for (uint64_t j = i; j < i + kSumGroup; j += 16) group_step(g, load16x2(ref + j), load16x2(got + j));
    if (!group_close(g, sr, se, mx)) group_redo(ref + i, got + i, sr, se);
  }
  block_close(sr, se, mx, ref + i, got + i, n - i, into);
}

}  // namespace iris::quant::detail
#endif
