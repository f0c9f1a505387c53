// NVFP4 (FORMATS.md 7.1, 7.4): E2M1 elements, one FP8 E4M3 scale per 16 elements of a row,
// and one FP32 scale per matrix -- what NVIDIA ModelOpt (`weight_scale_2`, multiplied) and
// compressed-tensors' nvfp4-pack-quantized (`weight_global_scale`, divided by) store.
//
// Codes: row-major rows of nvfp4_row_bytes(k) = ceil(k/16)*8 bytes, element 2j in the LOW
// nibble of byte j (both tools pack so); k not a multiple of 16 pads the row with code 0.
// Scales: nvfp4_row_scales(k) = ceil(k/16) E4M3 bytes a row.
//
// Decoding is each tool's own dequantization, the same three FP32 operations in the same
// order (ModelOpt NVFP4QTensor.dequantize; compressed-tensors NVFP4PackedCompressor.decompress
// with its [1]-shaped global scale, which promotes the BF16 scale to FP32):
//   s' = float(e4m3(scale)) * t        (ModelOpt)   or   float(e4m3(scale)) / t   (compressed-tensors)
//   w  = e2m1(code) * s'               (one FP32 rounding each, nearest even)
// and the two tools differ in one more place, code 8: ModelOpt's value table holds +0 there,
// compressed-tensors multiplies 0 by -1 and gets -0. A NaN result is the canonical NaN.
#pragma once

#include <cstdint>

#include "quant/tables.h"

namespace iris::quant {

constexpr uint64_t nvfp4_row_scales(uint64_t k) { return (k + 15) / 16; }
constexpr uint64_t nvfp4_row_bytes(uint64_t k) { return nvfp4_row_scales(k) * 8; }

// How a tensor's tensor scale and code 8 decode (the producing tool's convention).
struct Nvfp4Convention {
  bool tensor_scale_divides = false;  // true: compressed-tensors' weight_global_scale
  bool negative_zero = false;         // true: code 8 is -0.0 (compressed-tensors); false: +0.0 (ModelOpt)
};

// The block scale s' of one block: float(e4m3(scale)) times (or divided by) t. (Host and
// device: the kernels decode with these very functions; no FMA can form, nothing is added.)
IRIS_HD float nvfp4_block_scale(uint8_t scale, float tensor_scale, Nvfp4Convention c) {
  const float s = e4m3_to_f32(scale);
  return c.tensor_scale_divides ? s / tensor_scale : s * tensor_scale;
}
// One element: e2m1(code) * block_scale, code 8 as the convention says, NaN canonical.
IRIS_HD float nvfp4_value(uint8_t code, float block_scale, Nvfp4Convention c) {
  const uint8_t v = (code & 7u) == 0 && !c.negative_zero ? uint8_t(0) : uint8_t(code & 15u);
  return canonical_nan_if_nan(e2m1_to_f32(v) * block_scale);
}

// rows x k values of one matrix (one tensor scale) into out [rows, k].
void nvfp4_decode_rows(const uint8_t* codes, const uint8_t* scales, float tensor_scale, uint64_t rows, uint64_t k, Nvfp4Convention c,
                       float* out);

// ---- Encoding, ModelOpt's arithmetic (NVFP4QTensor.quantize with block 16 and the
// export's weights_scaling_factor_2 = amax / (6 * 448)), byte for byte:
//   t        = amax / 2688                                  (FP32; amax of |w| over the matrix,
//                                                            or over its fused siblings')
//   s_b      = e4m3(block_amax / (6 * t))                   (FP32 product, then quotient; a
//                                                            quotient of 0 is stored as 1.0)
//   y        = w / (float(s_b) * t)                         (FP32 product, then quotient)
//   code     = E2M1 magnitude of |y|, nearest with ties to even, saturating at 6, NaN to 6;
//              sign bit = (y < 0), so a negative value that rounds to zero is code 8
// Blocks are zero padded to 16 (ModelOpt's reduce_block_padding). Where ModelOpt's own
// arithmetic breaks down iris does not follow it: amax = 0 (an all-zero matrix, whose t of 0
// makes every ModelOpt scale NaN) takes t = 1, so all scales 1.0 and all codes 0; the padding
// past k is code 0 (ModelOpt's 0 / 0 gives 7 where a block's scale underflowed to 0: both
// decode to 0); a non-finite amax is the caller's to refuse (quant/nonfinite.h).
float nvfp4_tensor_scale(float amax);
uint8_t nvfp4_encode_element(float y);
// rows x k values -> codes and scales (layout above) with tensor scale t; decoded (may be
// null) gets what nvfp4_decode_rows gives back under the ModelOpt convention.
void nvfp4_encode_rows(const float* in, uint64_t rows, uint64_t k, float tensor_scale, uint8_t* codes, uint8_t* scales, float* decoded);

}  // namespace iris::quant
