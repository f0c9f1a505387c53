#include "quant/nonfinite.h"

#include <vector>

#include "common/parallel_for.h"
#include "quant/simd.h"

namespace iris::quant {

namespace {

IRIS_INLINE bool nonfinite(float x) { return (f32_bits(x) & 0x7f800000u) == 0x7f800000u; }
IRIS_INLINE bool nonfinite(uint16_t h) { return (h & 0x7f80u) == 0x7f80u; }

// Count over [i0, i1) (i1 - i0 < 2^32) and the first index there (i1 if none). The count is
// a branch-free loop over 32-bit lanes, which vectorises fully; the first index is searched
// for only when there is one (tracking it in the same loop, in 64-bit lanes, made the check
// cost more than the encoding it guards).
template <typename T>
IRIS_INLINE uint64_t count_range_body(const T* x, uint64_t i0, uint64_t i1, uint64_t* first) {
  uint32_t count = 0;
  for (uint64_t i = i0; i < i1; ++i) count += nonfinite(x[i]);
  uint64_t f = i0;
  if (count)
    while (!nonfinite(x[f])) ++f;
  *first = count ? f : i1;
  return count;
}
IRIS_HOT_LOOP_CLONES((template <typename T>), (<T>), uint64_t, count_range,
                     (const T* x, uint64_t i0, uint64_t i1, uint64_t* first),
                     (x, i0, i1, first))

template <typename T>
uint64_t count(const T* x, uint64_t n, uint64_t* first_index) {
  const uint64_t chunk = 1 << 16;
  const int64_t chunks = int64_t((n + chunk - 1) / chunk);
  std::vector<uint64_t> counts(static_cast<size_t>(chunks)), firsts(static_cast<size_t>(chunks));
  parallel_for(chunks, 4, [&](int64_t c) {
    const uint64_t i0 = uint64_t(c) * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    counts[size_t(c)] = count_range(x, i0, i1, &firsts[size_t(c)]);
  });
  uint64_t total = 0, first = n;
  for (int64_t c = 0; c < chunks; ++c) {
    total += counts[size_t(c)];
    if (counts[size_t(c)] && firsts[size_t(c)] < first) first = firsts[size_t(c)];
  }
  if (first_index) *first_index = first;
  return total;
}

}  // namespace

uint64_t count_nonfinite(const float* x, uint64_t n, uint64_t* first_index) { return count(x, n, first_index); }
uint64_t count_nonfinite_bf16(const uint16_t* x, uint64_t n, uint64_t* first_index) { return count(x, n, first_index); }

}  // namespace iris::quant
