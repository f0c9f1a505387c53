// Integer codes with group scales and zero points -- what GPTQ, AWQ and compressed-tensors'
// pack-quantized checkpoints store (FORMATS.md 7.1-7.3): w = (q - z) * s, with s a group's
// scale (F16, BF16 or F32) and z its zero point. This is the CPU reference of that
// arithmetic; how each checkpoint packs q and z is its scheme's business
// (converter/sources/packed_integers.h).
//
// The producing tools compute (q - z) as an integer (exact in any float type: |q - z| < 2^9),
// multiply by the scale in the scale's dtype, and round the product once to that dtype
// (torch's CPU and GPU multiplies of F16/BF16 tensors compute in FP32 and round). In FP32 the
// product of an F16 or BF16 scale (11 or 8 significant bits) and |q - z| < 2^9 is exact, so
// rounding it to the scale's dtype, nearest even, is that single rounding.
#pragma once

#include <cstdint>

#include "formats/dtype.h"

namespace iris::quant {

// The dequantized weight as the producing tool gives it, widened to FP32 (exactly: the value
// is one of the scale dtype's). scale_dtype: F16, BF16 or F32.
float int_group_value(float scale, int32_t q_minus_z, DType scale_dtype);

// Rows of an integer-group matrix, unpacked: codes [rows, k] (q), for each row its zero
// points and scales per group [rows, groups] (zeros may be null: all zero), group_of[k] the
// group of column k. out: [rows, k] FP32.
struct IntGroupRows {
  const uint8_t* codes;
  const int32_t* zeros;  // null: zero points of 0
  const float* scales;   // the scale dtype's values widened to FP32
  const uint32_t* group_of;
  uint64_t rows, k, groups;
  DType scale_dtype;
};
void int_group_decode_rows(const IntGroupRows& r, float* out);

}  // namespace iris::quant
