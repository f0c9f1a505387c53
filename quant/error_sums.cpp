#include "quant/error_sums.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/simd.h"

namespace iris::quant {

namespace {

constexpr int kLanes = 8;                   // interleaved partial sums: one AVX-512 vector of doubles
constexpr uint64_t kBlock = uint64_t(1) << 16;  // elements per parallel block

// One block: lane l takes the elements l, l + 8, ...; a select leaves out the non-finite
// sources. GCC 12 (-fopt-info-vec) vectorises the 8-lane body with 64-byte vectors in the
// AVX-512 clone (basic-block vectorisation); the previous loop, with a `continue`, was not
// vectorised at all ("control flow in loop").
IRIS_HOT_LOOP void block_sums(const float* ref, const float* got, uint64_t n, ErrorSums* out) {
  double sr[kLanes] = {}, se[kLanes] = {}, mx[kLanes] = {};
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float r = ref[i + l];
      const bool finite = (f32_bits(r) & 0x7f800000u) != 0x7f800000u;
      const double rd = finite ? double(r) : 0.0;
      const double e = finite ? double(got[i + l]) - rd : 0.0;
      sr[l] += rd * rd;
      se[l] += e * e;
      mx[l] = std::max(mx[l], std::fabs(e));
    }
  for (int l = 0; i < n; ++i, ++l) {
    const float r = ref[i];
    if ((f32_bits(r) & 0x7f800000u) == 0x7f800000u) continue;
    const double e = double(got[i]) - double(r);
    sr[l] += double(r) * double(r);
    se[l] += e * e;
    mx[l] = std::max(mx[l], std::fabs(e));
  }
  for (int l = 0; l < kLanes; ++l) out->merge({sr[l], se[l], mx[l]});
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
