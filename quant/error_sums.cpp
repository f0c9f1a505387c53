#include "quant/error_sums.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/simd.h"

namespace iris::quant {

namespace {

constexpr int kLanes = 16;                      // interleaved partial sums: one AVX-512 vector of floats
constexpr int kGroup = 256;                     // elements summed in float before the sums go to double
constexpr uint64_t kBlock = uint64_t(1) << 16;  // elements per parallel block
constexpr float kBig = 0x1p60f, kSmall = 0x1p-40f;  // the range summed in float (below)

// Elements [0, n) exactly, in double, element j into lane j % kLanes, and their largest error
// into mx unless it is null: the rare groups out of float's range (whose maximum the float
// pass already took) and the tail.
IRIS_INLINE void exact_sums(const float* ref, const float* got, uint64_t n, double* sr, double* se, float* mx) {
  for (uint64_t j = 0; j < n; ++j) {
    const float r = ref[j];
    if ((f32_bits(r) & 0x7f800000u) == 0x7f800000u) continue;
    const double e = double(got[j]) - double(r);
    sr[j % kLanes] += double(r) * double(r);
    se[j % kLanes] += e * e;
    if (mx) mx[j % kLanes] = std::max(mx[j % kLanes], float(std::fabs(e)));
  }
}

// One block, kGroup elements at a time: lane l takes the elements l, l + 16, ... of the group
// and sums r^2 and e^2 (e = got - r) in float, 16 terms per lane, which then go into double
// accumulators. So the error of a sum is a few float roundings per group (about 1e-6
// relative): exact enough for a report, and twice the lanes of double without a conversion
// per element (in double these sums took a quarter of a conversion's CPU time, run in cache).
// |e| is rounded once to float, which is monotonic, so the maximum is the exact maximum
// rounded to float. A select leaves out the non-finite sources.
IRIS_HOT_LOOP void block_sums(const float* ref, const float* got, uint64_t n, ErrorSums* out) {
  double sr[kLanes] = {}, se[kLanes] = {};
  float mx[kLanes] = {};
  uint64_t i = 0;
  for (; i + kGroup <= n; i += kGroup) {
    float gr[kLanes] = {}, ge[kLanes] = {}, gmr[kLanes] = {}, gme[kLanes] = {};
    for (int j = 0; j < kGroup; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float r = ref[i + j + l];
        const bool finite = (f32_bits(r) & 0x7f800000u) != 0x7f800000u;
        const float rf = finite ? r : 0.f;
        const float e = finite ? got[i + j + l] - r : 0.f;
        gr[l] += rf * rf;
        ge[l] += e * e;
        gmr[l] = std::max(gmr[l], std::fabs(rf));
        gme[l] = std::max(gme[l], std::fabs(e));
      }
    // A group whose largest value or error is beyond 2^60 (16 squares could overflow float)
    // or below 2^-40 but not 0 (its squares could vanish, wholly or in part) is rare; it is
    // summed again exactly, in double. NaN errors (a NaN decode) fail the test too.
    bool redo = false;
    for (int l = 0; l < kLanes; ++l) {
      mx[l] = std::max(mx[l], gme[l]);
      redo |= !(gmr[l] <= kBig && gme[l] <= kBig) || (gmr[l] < kSmall && gmr[l] != 0.f) || (gme[l] < kSmall && gme[l] != 0.f);
    }
    if (redo) {
      exact_sums(ref + i, got + i, kGroup, sr, se, nullptr);
      continue;
    }
    for (int l = 0; l < kLanes; ++l) {
      sr[l] += double(gr[l]);
      se[l] += double(ge[l]);
    }
  }
  exact_sums(ref + i, got + i, n - i, sr, se, mx);  // the tail
  for (int l = 0; l < kLanes; ++l) out->merge({sr[l], se[l], double(mx[l])});
}

}  // namespace

void add_error_sums(const float* ref, const float* got, uint64_t n, ErrorSums* into) {
  const uint64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<ErrorSums> part(blocks);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < int64_t(blocks); ++b) {
    const uint64_t i0 = uint64_t(b) * kBlock;
    block_sums(ref + i0, got + i0, std::min(kBlock, n - i0), &part[b]);
  }
  for (const ErrorSums& p : part) into->merge(p);  // in block order: deterministic
}

}  // namespace iris::quant
