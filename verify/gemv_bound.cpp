#include "verify/gemv_bound.h"

#include <cmath>

#include "common/float_bits.h"

namespace iris {

double gemv_error_bound(uint64_t k, double sum_abs_products, GemvAccumulation acc, double sum_abs_x) {
  const double flush = double(k) * std::ldexp(1.0, -126);
  if (acc == GemvAccumulation::kFp32) {
    const double ku = double(k) * std::ldexp(1.0, -24);
    return ku / (1.0 - ku) * sum_abs_products + flush;
  }
  const double nu = double(k + 64) * std::ldexp(1.0, -22);
  const double u_bf16 = std::ldexp(1.0, -8);  // BF16 keeps 8 significant bits
  if (acc == GemvAccumulation::kTensorCoresBf16Table) {
    const double weights = (1 + u_bf16) * (1 + u_bf16) * (1 + u_bf16) - 1;
    return (nu / (1.0 - nu) + weights) * sum_abs_products + flush + std::ldexp(1.0, -132) * sum_abs_x;
  }
  return (nu / (1.0 - nu) + u_bf16 * u_bf16 + std::ldexp(1.0, -24)) * sum_abs_products + flush;
}

GemvAccumulation gemv_accumulation(bool tensor_cores, bool nf4_bf16_table_applies) {
  if (!tensor_cores) return GemvAccumulation::kFp32;
  return nf4_bf16_table_applies ? GemvAccumulation::kTensorCoresBf16Table : GemvAccumulation::kTensorCores;
}

CheckResult check_gemv_row_sums(const float* w, const uint16_t* x, uint64_t rows, uint64_t k, const float* y,
                                const std::string& name, GemvAccumulation acc) {
  for (uint64_t r = 0; r < rows; ++r) {
    double ref = 0, mag = 0, mag_x = 0;
    bool finite = true;
    for (uint64_t i = 0; i < k; ++i) {
      const double p = double(w[r * k + i]) * double(bf16_to_f32(x[i]));
      finite &= std::isfinite(p);
      ref += p;
      mag += std::fabs(p);
      mag_x += std::fabs(double(bf16_to_f32(x[i])));
    }
    if (!finite) {
      // NaN/Inf weights (scale 0xFF, say): the GPU must not produce a finite number.
      if (std::isfinite(y[r])) return {name, false, "row " + std::to_string(r) + ": reference is not finite, gpu gave " + std::to_string(y[r])};
      continue;
    }
    // Past FLT_MAX the FP32 accumulation may overflow even though the exact sum is finite:
    // the bound no longer applies, and an infinite (or NaN) result is the honest answer.
    if (mag > 3.4028234663852886e38 && !std::isfinite(y[r])) continue;
    const double err = std::fabs(double(y[r]) - ref), bound = gemv_error_bound(k, mag, acc, mag_x);
    if (!(err <= bound)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "row %llu: gpu %.9g, reference %.9g, |error| %.3g > bound %.3g", (unsigned long long)r, double(y[r]),
                    ref, err, bound);
      return {name, false, buf};
    }
  }
  return {name, true, ""};
}

}  // namespace iris
