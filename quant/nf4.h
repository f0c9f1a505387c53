// bitsandbytes 4-bit weights (NF4, and FP4 through its code table), with or without double
// quantization of the absmax (FORMATS.md section 3). Flat layout: the [N, K] tensor is one
// sequence of n elements (blocks may straddle rows; n need not be even or a multiple of
// anything); codes hold element 2j in the HIGH nibble of byte j, element 2j+1 in the low one.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/element_encode.h"

namespace iris::quant {

struct Bnb4bitParams {
  uint64_t block_size = 64;
  const float* code_table = nullptr;      // 16 values (the file's quant_map); null: NF4 (nf4_to_f32)
  bool double_quant = false;
  const float* absmax = nullptr;          // !double_quant: ceil(n/block_size) FP32
  const uint8_t* absmax_codes = nullptr;  // double_quant: ceil(n/block_size) codes
  const float* nested_absmax = nullptr;   // double_quant: ceil(n_absmax/nested_block_size)
  const float* nested_map = nullptr;      // double_quant: 256 values; null: dynamic_map_value
  uint64_t nested_block_size = 256;
  float nested_offset = 0.f;              // the JSON's nested_offset, parsed as double, cast to float
};

// ---- Decoding (FORMATS.md 3.4).

// The absmax of block b, double dequantization included: nested_map[q] * nested_absmax[b /
// nested_block_size], then + offset: two separately rounded FP32 operations, as bnb's two
// passes (never fused).
float bnb_block_absmax(const Bnb4bitParams& p, uint64_t block);

// The oracle, elements [i0, i1) of the flattened tensor into out[0, i1 - i0):
// w = code_table[nibble] * absmax(i / block_size), one FP32 product; NaN results are the
// canonical NaN (common/float_bits.h).
void bnb4_decode_ref(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out);
// The same bits, fast: one table of 16 products per block, blocks in parallel (common/parallel_for.h).
void bnb4_decode_range(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out);
void bnb4_decode(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, float* out);
// The same, with `codes` a window of the packed codes whose byte 0 holds element `first`
// (even, <= i0): what a row range of tiled codes, untiled on its own, looks like.
void bnb4_decode_window(const uint8_t* codes, uint64_t first, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out);
// BF16 output: each FP32 product rounded once (nearest even), which is exactly what bnb's
// dequantize_4bit returns for a bfloat16 quant_state.dtype.
void bnb4_decode_bf16(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, uint16_t* out);

// ---- Encoding: NF4 with double quantization, byte for byte what bitsandbytes
// quantize_4bit(quant_type="nf4", blocksize=64, compress_statistics=True) writes on CUDA
// (FORMATS.md 3.2, 3.3):
//  1. blocks of 64: absmax = max |w| (FP32, NaN ignored as fmaxf does; a full block starts
//     from -FLT_MAX, a short last block from 0 because bnb reads its padding as zeros);
//     w * (1.0f / absmax) (reciprocal, then multiply); code by nf4_encode. An all-zero block
//     gets absmax 0 and code 0 everywhere (0 * Inf = NaN -> code 0), which decodes to -0.0.
//     With n odd, the last byte's low nibble is the code of a padding 0.
//  2. offset = mean(absmax): the sum in double, divided by the count, rounded to FP32 (this
//     reproduces every offset bitsandbytes stored in the fixtures).
//  3. absmax - offset in blocks of 256 over the dynamic map: nested_absmax = max |.|, the
//     normalized value (times the FP32 reciprocal) coded by dynamic_map_encode.
// NaN/Inf input: never crashes; as in bnb, NaN elements get code 0 and Inf makes its block's
// absmax Inf (the other elements code 7, the Inf code 0) and then the offset and all nested
// values NaN. Use count_nonfinite (quant/nonfinite.h) to refuse such input.
struct Nf4DoubleQuant {
  std::vector<uint8_t> codes;          // (n+1)/2 bytes, first element in the HIGH nibble
  std::vector<uint8_t> absmax_codes;   // ceil(n/64)
  std::vector<float> nested_absmax;    // ceil(n_absmax/256)
  float offset = 0;                    // mean of the first-level absmax
};

// The oracle: plain loops, the decision tree.
void nf4_encode_dq_ref(const float* in, uint64_t n, Nf4DoubleQuant* out);
// The same bytes, vectorised, blocks in parallel (common/parallel_for.h); FP32 or BF16 input.
void nf4_encode_dq(const float* in, uint64_t n, Nf4DoubleQuant* out);
void nf4_encode_dq_bf16(const uint16_t* in, uint64_t n, Nf4DoubleQuant* out);

// The same in passes, for tensors streamed in chunks. A chunk covers elements
// [i0, i0 + count) of the n-element tensor; i0 is a multiple of 64 and the chunk ends on a
// block boundary or at n.
// 1. absmax[b] for the blocks of the chunk
void nf4_block_absmax(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax);
//    the same from BF16 bit patterns (which widen to FP32 exactly): the same absmax
void nf4_block_absmax_bf16(const uint16_t* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax);
// 2. the offset and the double quantization of all nabs absmax values (fills absmax_codes,
//    nested_absmax and offset of *out; codes untouched)
void nf4_quantize_absmax(const float* absmax, uint64_t nabs, Nf4DoubleQuant* out);
// The same in pieces, for a tensor that streams in chunks: the offset is the in-order double
// sum of every absmax value (nf4_absmax_sum over consecutive ranges, `running` carried from
// one to the next) divided by their count; then groups [g0, g1) of 256 absmax values, once
// all their values are known, into absmax_codes / nested_absmax (whole-tensor arrays,
// absolute indices). The bytes equal nf4_quantize_absmax's.
double nf4_absmax_sum(const float* absmax, uint64_t count, double running);
float nf4_offset_from_sum(double sum, uint64_t nabs);
void nf4_quantize_absmax_groups(const float* absmax, uint64_t g0, uint64_t g1, uint64_t nabs, float offset, uint8_t* absmax_codes,
                                float* nested_absmax);
// 3. the codes of the chunk into codes[0, (count+1)/2), normalized by the FIRST-level absmax
//    (as bitsandbytes does: the double-quantized absmax is only used to decode)
void nf4_encode_codes(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, const float* absmax, uint8_t* codes);
// 1 and 3 in one pass over the chunk (while its values are in cache): absmax[b] for its
//    blocks and its codes into codes[0, (count+1)/2).
void nf4_encode_first_level(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax, uint8_t* codes);

}  // namespace iris::quant
