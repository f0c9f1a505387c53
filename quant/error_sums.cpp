#include "quant/error_sums.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/parallel_for.h"
#include "quant/error_sums_avx2.h"
#include "quant/error_sums_groups.h"
#include "quant/simd.h"

namespace iris::quant {

namespace {

// One block of at most kSumBlock elements (error_sums_groups.h), its groups summed in float
// lanes the vectoriser turns into AVX-512; its AVX2 compilation stayed scalar, so that path is
// written by hand (error_sums_avx2.h's block_sums_avx2).
IRIS_INLINE void block_sums_body(const float* ref, const float* got, uint64_t n, ErrorSums* out) {
  detail::SumLanes lanes;
  uint64_t i = 0;
  for (; i + detail::kSumGroup <= n; i += detail::kSumGroup) detail::group_sums(ref + i, got + i, lanes);
  detail::exact_sums(ref + i, got + i, n - i, lanes.sr, lanes.se, lanes.mx);  // the tail
  detail::close_block(lanes, out);
}
#ifdef IRIS_X86_INTRINSICS
using detail::block_sums_avx2;
#endif
IRIS_HOT_LOOP_CLONES_AVX2_BY_HAND((), (), void, block_sums,
                                  (const float* ref, const float* got, uint64_t n, ErrorSums* out),
                                  (ref, got, n, out))

}  // namespace

void add_error_sums(const float* ref, const float* got, uint64_t n, ErrorSums* into) { add_error_sums(detail::cpu_path(), ref, got, n, into); }

void add_error_sums(detail::CpuPath path, const float* ref, const float* got, uint64_t n, ErrorSums* into) {
  path = std::min(path, detail::cpu_best_path());  // never a path the CPU lacks
  const uint64_t blocks = (n + detail::kSumBlock - 1) / detail::kSumBlock;
  std::vector<ErrorSums> part(blocks);
  parallel_for(int64_t(blocks), int64_t(std::max<uint64_t>(1, kGrainValues / detail::kSumBlock)), [&](int64_t b) {
    const uint64_t i0 = uint64_t(b) * detail::kSumBlock;
    block_sums_on(path, ref + i0, got + i0, std::min(detail::kSumBlock, n - i0), &part[size_t(b)]);
  });
  for (const ErrorSums& p : part) into->merge(p);  // in block order: deterministic
}

}  // namespace iris::quant
