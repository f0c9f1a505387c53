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
//
// bitsandbytes' LLM.int8 (FORMATS.md 7.5) is the same arithmetic with one more FP32 multiply:
// int8_vectorwise_dequant computes `A * SCB * 7.874015718698502e-3` (the FP32 nearest 1/127) as
// two torch multiplies, each rounded once. `post_factor` is that constant (1: none; x * 1 is x,
// so the other schemes' arithmetic is unchanged by it).
#pragma once

#include <cstdint>

#include "formats/dtype.h"

namespace iris::quant {

// The dequantized weight as the producing tool gives it, widened to FP32 (exactly: the value
// is one of the scale dtype's): round_s((scale * q_minus_z) * post_factor). scale_dtype: F16,
// BF16 or F32.
float int_group_value(float scale, int32_t q_minus_z, DType scale_dtype, float post_factor = 1.0f);

// The FP32 constant bitsandbytes multiplies LLM.int8 codes by after their row scale (1/127).
inline constexpr float kLlmInt8PostFactor = 7.874015718698502e-3f;

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
  float post_factor = 1.0f;
};
void int_group_decode_rows(const IntGroupRows& r, float* out);

// Code j of a row of int_group codes (FORMAT.md 4.5): `bits`-bit fields packed little-endian,
// code j at bit bits * j of the row (a 3-bit code may straddle two bytes).
inline uint32_t int_group_code(const uint8_t* row, uint32_t bits, uint64_t j) {
  const uint64_t bit = uint64_t(bits) * j;
  uint32_t v = row[bit >> 3] >> (bit & 7);
  if ((bit & 7) + bits > 8) v |= uint32_t(row[(bit >> 3) + 1]) << (8 - (bit & 7));
  return v & ((1u << bits) - 1u);
}
// Stores code v at place j of a zeroed row (the inverse of int_group_code).
inline void int_group_put_code(uint8_t* row, uint32_t bits, uint64_t j, uint32_t v) {
  const uint64_t bit = uint64_t(bits) * j;
  row[bit >> 3] = uint8_t(row[bit >> 3] | (v << (bit & 7)));
  if ((bit & 7) + bits > 8) row[(bit >> 3) + 1] = uint8_t(row[(bit >> 3) + 1] | (v >> (8 - (bit & 7))));
}

// Rows of an int_group tensor from its stored form: codes row-major (row_bytes a row), scales
// as stored (scale_dtype), zero points u8 (null: every zero point is 2^(bits-1), the
// symmetric codes' offset), and, with act-order, the permutation
// (stored column j holds logical column perm[j]; null: none). Row r's group j / group_size.
// out: [rows, k] FP32, logical column order.
struct IntGroupStored {
  const uint8_t* codes;
  uint64_t row_bytes;
  const uint8_t* scales;
  const uint8_t* zeros;
  const uint32_t* perm;
  uint32_t bits;
  uint64_t rows, k, group_size, groups;
  DType scale_dtype;
  float post_factor = 1.0f;
};
void int_group_decode_stored(const IntGroupStored& s, float* out);

}  // namespace iris::quant
