// The sums behind a requantized tensor's quality report: squares of the source values and of
// the decode's errors, and the largest error, over the finite source values (non-finite ones,
// kept with --allow-nonfinite, are left out).
#pragma once

#include <cstdint>

namespace iris::quant {

struct ErrorSums {
  double sum_sq_ref = 0, sum_sq_err = 0, max_abs_err = 0;

  void merge(const ErrorSums& o) {
    sum_sq_ref += o.sum_sq_ref;
    sum_sq_err += o.sum_sq_err;
    max_abs_err = o.max_abs_err > max_abs_err ? o.max_abs_err : max_abs_err;
  }
};

// Squares summed in float over groups of 256 elements (16 interleaved lanes, quant/simd.h
// clones) and the group sums in double: about 1e-6 relative, exact enough to report; the
// maximum error is the exact one rounded to float. Blocks of a long run summed on all cores
// and combined in block order: the same bits for the same n whatever the thread count. Adds
// to `into`.
void add_error_sums(const float* ref, const float* got, uint64_t n, ErrorSums* into);

namespace detail {
enum class CpuPath;  // quant/simd.h
}
// The same on the vector path named (one the CPU has), not the process's: the tests check that
// every path gives the same bits.
void add_error_sums(detail::CpuPath path, const float* ref, const float* got, uint64_t n, ErrorSums* into);

}  // namespace iris::quant
