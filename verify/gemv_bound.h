// The acceptance bound for a GPU GEMV against a double-precision CPU reference.
//
// The kernels accumulate in FP32 (fused multiply-adds and a shuffle tree), so each output is
// a sum of K products whose rounding error is at most gamma_K * sum_k |w_k x_k| with
// gamma_K = K u / (1 - K u), u = 2^-24 (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1), for any summation order. The products themselves are exact in double.
// Subnormal flushing adds at most K * 2^-126 in absolute terms. The bound assumes no
// overflow: where sum |w x| exceeds FLT_MAX, a non-finite result is accepted.
//
// The tensor-core path (kernels/gemv_mma.cu) multiplies BF16 operands exactly into FP32 and
// accumulates inside the mma with truncation and alignment of the 16 products to the largest
// one (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021):
// its bound uses u' = 2^-22 (four times u: a factor 2 for truncation, 2 for the alignment) and
// K + 64 rounding steps (the chunk scalings and the warp sum), plus 2^-16 for the NF4 table
// values carried as two BF16s (hi = bf16(t) within 2^-8 |t| of t, lo = bf16(t - hi) within
// 2^-8 of that: BF16 keeps 8 significant bits, so its unit roundoff is 2^-8) and u for the
// weights' own FP32 rounding, which the scaled path does not repeat:
//   bound_tc = (gamma_{K+64}(2^-22) + 2^-16 + 2^-24) * sum |w x| + K 2^-126.
// With NF4's declared BF16 table (LaunchConfig::nf4_bf16_table, IRIS_NF4_TABLE_BF16) each
// weight is bitsandbytes' bf16(bf16(t) * bf16(absmax)): three roundings to nearest BF16, each
// within 2^-8 relative, so (1 + 2^-8)^3 - 1 replaces 2^-16 + 2^-24; where bf16(absmax) or the
// product lands among BF16's subnormals each rounding is within 2^-134 absolute instead, which
// with |t| <= 1 (the NF4 and bitsandbytes FP4 tables) adds at most 2^-132 sum_k |x_k|. The
// bound holds where bf16(absmax) is finite (|absmax| below 0x1.ffp127).
#pragma once

#include <cstdint>
#include <string>

#include "verify/verify_report.h"

namespace iris {

enum class GemvAccumulation {
  kFp32,
  kTensorCores,
  kTensorCoresBf16Table,  // the tensor cores with NF4's weights as bitsandbytes forms them in BF16
};

// sum_abs_x: sum_k |x_k|, for the BF16 table's subnormal weights (below).
double gemv_error_bound(uint64_t k, double sum_abs_products, GemvAccumulation acc = GemvAccumulation::kFp32, double sum_abs_x = 0);

// The bound a GEMV run is held to: the CUDA-core one, or the tensor cores' with NF4's declared
// BF16 table where it applies (an NF4 tensor, the table asked for) and the exact table's otherwise.
GemvAccumulation gemv_accumulation(bool tensor_cores, bool nf4_bf16_table_applies);

// Checks y[row] against sum_k w[row*k + kk] * x[kk] (x in bf16 bits) for every row.
CheckResult check_gemv_row_sums(const float* w, const uint16_t* x, uint64_t rows, uint64_t k, const float* y,
                                const std::string& name, GemvAccumulation acc = GemvAccumulation::kFp32);

}  // namespace iris
