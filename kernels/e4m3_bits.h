// E4M3 placed on BF16 bits by integer operations, for the tensor-core GEMV's FP8 bit decode
// (gemv_mma.cu). Host and device: tests/kernels checks it on every code, on the CPU.
#pragma once

#include <cstdint>

#include "common/float_bits.h"

namespace iris {

// p holds two E4M3 bytes in its bytes 1 and 3 ([0, b0, 0, b1]). Shifting right by 4 moves each
// byte's exponent and mantissa on a BF16's low exponent bits and top mantissa bits (its sign
// already sits on bit 15 / 31), which is e4m3(b) * 2^-120 exactly -- E4M3 subnormals become
// BF16 subnormals -- so one exact BF16 multiply by kE4m3Bf16Rescale gives the value. NaN codes
// (0x7F, 0xFF) come out as 480 * 2^-120: callers detect them separately.
IRIS_HD constexpr uint32_t e4m3_pair_to_bf16x2_scaled(uint32_t p) { return ((p >> 4) & 0x07F007F0u) | (p & 0x80008000u); }

// 2^120 as a BF16 pair (exponent 247).
constexpr uint32_t kE4m3Bf16Rescale = 0x7B807B80u;

}  // namespace iris
