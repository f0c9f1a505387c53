// bitsandbytes 4-bit (NF4, and FP4 through its code table), with or without double
// quantization of the absmax (FORMATS.md section 3).
#pragma once

#include <cstdint>
#include <vector>

namespace iris::quant {

struct Bnb4bitParams {
  uint64_t block_size = 64;
  const float* code_table = nullptr;  // 16 values (the file's quant_map)
  bool double_quant = false;
  const float* absmax = nullptr;          // !double_quant: ceil(n/block_size) FP32
  const uint8_t* absmax_codes = nullptr;  // double_quant: ceil(n/block_size) codes
  const float* nested_absmax = nullptr;   // double_quant: ceil(n_absmax/nested_block_size)
  const float* nested_map = nullptr;      // double_quant: 256 values
  uint64_t nested_block_size = 256;
  float nested_offset = 0.f;
};

// The absmax of block b, double dequantization included: map[q] * nested_absmax, then
// + offset, two separately rounded FP32 operations.
float bnb_block_absmax(const Bnb4bitParams& p, uint64_t block);

// Elements [i0, i1) of the flattened tensor; codes hold element 2j in the HIGH nibble of
// byte j. w = code_table[nibble] * absmax[i / block_size] (one FP32 product); a NaN result
// is the canonical NaN (common/float_bits.h).
void bnb4_decode_ref(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out);
// [i0, i1) in parallel (i0 a multiple of block_size).
void bnb4_decode_range(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out);
// The same over [0, n), blocks in parallel.
void bnb4_decode(const uint8_t* codes, uint64_t n, const Bnb4bitParams& p, float* out);

}  // namespace iris::quant

namespace iris::quant {

// NF4 code of x (already normalized to [-1, 1]): bitsandbytes' decision tree over the FP32
// midpoints, strict '>' (a value on a midpoint takes the lower code), NaN -> code 0.
uint8_t nf4_encode(float x);
// The same code, branch-free (the number of thresholds x exceeds): what the fast encoder uses.
uint8_t nf4_encode_fast(float x);

// The 8-bit code of x in the signed dynamic map, as bitsandbytes' dQuantize: a 7-step
// binary search over the sorted map, then a midpoint comparison.
uint8_t dynamic_map_encode(float x);

struct Nf4DoubleQuant {
  std::vector<uint8_t> codes;          // (n+1)/2 bytes, first element in the HIGH nibble
  std::vector<uint8_t> absmax_codes;   // ceil(n/64)
  std::vector<float> nested_absmax;    // ceil(n_absmax/256)
  float offset = 0;                    // mean of the first-level absmax
};

// Quantizes n values (flattened) exactly as bitsandbytes quantize_4bit(nf4,
// compress_statistics=True) does: blocks of 64, absmax, normalization by the FP32
// reciprocal, then double quantization of absmax - mean(absmax) in blocks of 256 over the
// dynamic map.
void nf4_encode_dq_ref(const float* in, uint64_t n, Nf4DoubleQuant* out);
void nf4_encode_dq(const float* in, uint64_t n, Nf4DoubleQuant* out);

// The same in passes, for tensors streamed in chunks (chunks start on a 64-element block):
// 1. the absmax of each block of [i0, i0 + count)
void nf4_block_absmax(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax);
// 2. the offset and the double quantization of all absmax values
void nf4_quantize_absmax(const float* absmax, uint64_t nabs, Nf4DoubleQuant* out);
// 3. the codes of [i0, i0 + count), normalized by the FIRST-level absmax (as bitsandbytes)
void nf4_encode_codes(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, const float* absmax, uint8_t* codes);

}  // namespace iris::quant
