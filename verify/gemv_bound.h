// The acceptance bound for a GPU GEMV against a double-precision CPU reference.
//
// The kernels accumulate in FP32 (fused multiply-adds and a shuffle tree), so each output is
// a sum of K products whose rounding error is at most gamma_K * sum_k |w_k x_k| with
// gamma_K = K u / (1 - K u), u = 2^-24 (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1), for any summation order. The products themselves are exact in double.
// Subnormal flushing adds at most K * 2^-126 in absolute terms. The bound assumes no
// overflow: where sum |w x| exceeds FLT_MAX, a non-finite result is accepted.
#pragma once

#include <cstdint>
#include <string>

#include "verify/verify_report.h"

namespace iris {

double gemv_error_bound(uint64_t k, double sum_abs_products);

// Checks y[row] against sum_k w[row*k + kk] * x[kk] (x in bf16 bits) for every row.
CheckResult check_gemv_row_sums(const float* w, const uint16_t* x, uint64_t rows, uint64_t k, const float* y,
                                const std::string& name);

}  // namespace iris
