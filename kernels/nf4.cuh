// bitsandbytes NF4 with (optional) double quantization: decoding 8 elements, the nested
// absmax included, so the whole dequantization is one launch.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/packed_decode.cuh"

namespace iris::dev {

struct Nf4 {
  static constexpr int kItem = 8;
  static constexpr uint32_t kBits = 4;
  using Word = uint32_t;

  // Code table (16) and nested dynamic map (256) into shared memory, once per block.
  static __device__ __forceinline__ void load_tables(const QuantView& v, float* smem) {
    for (int i = threadIdx.x; i < 16; i += blockDim.x) smem[i] = v.code_table[i];
    if (v.double_quant)
      for (int i = threadIdx.x; i < 256; i += blockDim.x) smem[16 + i] = v.nested_code_table[i];
  }

  // The absmax of block `blk`, in two steps so that a caller can issue the loads of several
  // blocks before using any: `absmax_inputs` loads (the absmax code and its nested absmax, or
  // the FP32 absmax), `absmax_of` looks the code up in the nested map (256 floats).
  struct AbsmaxInputs {
    uint32_t q;      // absmax code (double quant) ...
    float nested;    // ... and its nested absmax; or the FP32 absmax itself
  };
  static __device__ __forceinline__ AbsmaxInputs absmax_inputs(const QuantView& v, uint64_t blk) {
    if (!v.double_quant) return {0u, __ldg(static_cast<const float*>(v.scales) + blk)};
    return {__ldg(static_cast<const uint8_t*>(v.scales) + blk), __ldg(v.nested_absmax + div_by(blk, v.nested_block_size, v.nested_shift))};
  }
  static __device__ __forceinline__ float absmax_of(const QuantView& v, const float* nested_map, AbsmaxInputs a) {
    if (!v.double_quant) return a.nested;
    // Two separately rounded FP32 operations, as bitsandbytes does (no FMA).
    return __fadd_rn(__fmul_rn(nested_map[a.q], a.nested), v.nested_offset);
  }
  static __device__ __forceinline__ float absmax(const QuantView& v, const float* smem, uint64_t blk) {
    return absmax_of(v, smem + 16, absmax_inputs(v, blk));
  }

  static __device__ __forceinline__ Word load(const QuantView& v, uint64_t byte_offset) {
    const uint8_t* p = v.codes + byte_offset;
    const uint64_t bytes = (v.rows * v.k + 1) / 2;
    if (v.tiled || byte_offset + 4 <= bytes) return __ldg(reinterpret_cast<const uint32_t*>(p));
    uint32_t w = 0;  // the flat tail: fewer than 4 bytes remain
    for (uint64_t j = 0; byte_offset + j < bytes; ++j) w |= uint32_t(p[j]) << (8 * j);
    return w;
  }

  // Elements [k0, k0 + 8) of `row`; flat index i = row * k + kk (blocks ignore rows).
  static __device__ __forceinline__ void decode_word(const QuantView& v, const float* smem, uint64_t row, uint64_t k0, Word w,
                                                     float (&out)[kItem]) {
    const float am = absmax(v, smem, div_by(row * v.k + k0, v.block_size, v.block_shift));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (w >> (8 * j)) & 0xffu;
      out[j * 2 + 0] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte >> 4], am));  // high nibble = even element
      out[j * 2 + 1] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte & 15u], am));
    }
  }

  // BF16 fast path (dequant v4): the absmax inputs of elements [k0, k0 + 8) of `row`, loaded
  // with the codes; the table lookup waits for the decode step.
  using Aux = AbsmaxInputs;
  static __device__ __forceinline__ bool tables_finite(const QuantView&, const float* smem) {
    return threadIdx.x >= 16 || isfinite(smem[threadIdx.x]);
  }
  static __device__ __forceinline__ Aux load_aux(const QuantView& v, const float*, uint64_t row, uint64_t k0) {
    return absmax_inputs(v, div_by(row * v.k + k0, v.block_size, v.block_shift));
  }
  // Finite table and absmax: no product is NaN, so the hardware rounding (cvt.rn.bf16x2)
  // equals the reference's; otherwise the caller takes the scalar path (canonical NaN).
  static __device__ __forceinline__ bool decode_bf16(const QuantView& v, Word w, Aux a, const float* smem, bool tables_ok, uint4& out) {
    const float am = absmax_of(v, smem + 16, a);
    if (!tables_ok || !isfinite(am)) return false;
    uint32_t r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (w >> (8 * j)) & 0xffu;
      r[j] = pack_bf16x2(__fmul_rn(smem[byte >> 4], am), __fmul_rn(smem[byte & 15u], am));  // high nibble = even element
    }
    out = make_uint4(r[0], r[1], r[2], r[3]);
    return true;
  }

  static __device__ __forceinline__ void decode(const QuantView& v, const float* t, uint64_t row, uint64_t k0, float (&out)[kItem]) {
    decode_word(v, t, row, k0, load(v, code_offset(v, row, k0, kBits)), out);
  }
};

}  // namespace iris::dev
