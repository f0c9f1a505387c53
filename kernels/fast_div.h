// Division by a run-time constant with a multiply-high and a shift (Granlund & Montgomery,
// "Division by invariant integers using multiplication", 1994; the form CUTLASS's FastDivmod
// uses). The kernels turn a flat item index into tile coordinates with it: a 32-bit hardware
// division costs ~20 instructions, this costs two.
//
// Valid for dividends n < 2^31 and divisors 1 <= d < 2^31 (tests/kernels/fast_div_test.cpp
// checks it against `/` on the host; the device runs the same expression).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define IRIS_FD_HD __host__ __device__ __forceinline__
#else
#define IRIS_FD_HD inline
#endif

namespace iris {

struct FastDiv {
  uint32_t d = 1, mul = 0, shr = 0;

  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    if (d <= 1) return;  // n / 1 = n: mul 0 marks it
    uint32_t l = 0;      // ceil(log2(d))
    while ((uint64_t(1) << l) < d) ++l;
    const uint32_t p = 31 + l;
    mul = uint32_t(((uint64_t(1) << p) + d - 1) / d);
    shr = p - 32;
  }

  IRIS_FD_HD uint32_t div(uint32_t n) const {
    if (d == 1) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, mul) >> shr;
#else
    return uint32_t((uint64_t(n) * mul) >> 32) >> shr;
#endif
  }
};

}  // namespace iris
