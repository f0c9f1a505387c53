// NVFP4 (FORMAT.md 4.6: E2M1 x E4M3 per 16 x an FP32 scale per matrix): decoding 8 elements
// of a row from 4 code bytes, in the archive's nibble order, as quant/nvfp4.h does -- the
// block scale float(e4m3) times (or divided by) the matrix's tensor scale, then one FP32
// multiplication a weight, code 8 +0 or -0 as the producing tool's convention says. The
// generic kernels (dequant.cu, gemv_cuda_cores.cuh, gemv_experts.cu) take it as they take
// dev::Mxfp4; no tensor-core GEMV decodes it yet.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/packed_decode.cuh"
#include "quant/nvfp4.h"

namespace iris::dev {

struct Nvfp4 {
  static constexpr int kItem = 8;  // elements per work item: 4 bytes of codes (half a 16-element block)
  static constexpr uint32_t kBits = 4;
  using Word = uint32_t;

  // The 16 E2M1 values, code 8 as the tensor's convention decodes it.
  static __device__ __forceinline__ void load_tables(const QuantView& v, float* smem) {
    for (int i = threadIdx.x; i < 16; i += blockDim.x) smem[i] = i == 8 && !v.nvfp4_negative_zero ? 0.0f : e2m1(uint32_t(i));
  }

  static __device__ __forceinline__ Word load(const QuantView& v, uint64_t byte_offset) {
    return __ldg(reinterpret_cast<const uint32_t*>(v.codes + byte_offset));
  }

  // The block scale of elements [k0, k0 + 8) of `row` (k0 a multiple of 8: one block).
  static __device__ __forceinline__ float block_scale(const QuantView& v, uint64_t row, uint64_t k0) {
    const uint8_t sb = __ldg(static_cast<const uint8_t*>(v.scales) + row * ((v.k + 15) / 16) + k0 / 16);
    const float t = __ldg(v.tensor_scale + (v.single_matrix ? 0 : row / v.n));
    return quant::nvfp4_block_scale(sb, t, {v.nvfp4_divides, v.nvfp4_negative_zero});
  }

  static __device__ __forceinline__ void decode_word(const QuantView& v, const float* smem, uint64_t row, uint64_t k0, Word w,
                                                     float (&out)[kItem]) {
    const float s = block_scale(v, row, k0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (w >> (8 * j)) & 0xffu;
      out[j * 2 + 0] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte & 15u], s));  // low nibble = even element
      out[j * 2 + 1] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte >> 4], s));
    }
  }

  // BF16 fast path: the block scale, loaded with the codes.
  using Aux = float;
  static __device__ __forceinline__ bool tables_finite(const QuantView&, const float*) { return true; }
  static __device__ __forceinline__ Aux load_aux(const QuantView& v, const float*, uint64_t row, uint64_t k0) { return block_scale(v, row, k0); }
  // A finite scale makes no NaN (E2M1 values are finite): each FP32 product rounded once to
  // BF16, as the reference rounds it. A NaN or infinite scale takes the scalar path.
  static __device__ __forceinline__ bool decode_bf16(const QuantView&, Word w, Aux s, const float* smem, bool, uint4& out) {
    if (!isfinite(s)) return false;
    uint32_t r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (w >> (8 * j)) & 0xffu;
      r[j] = pack_bf16x2(__fmul_rn(smem[byte & 15u], s), __fmul_rn(smem[byte >> 4], s));
    }
    out = make_uint4(r[0], r[1], r[2], r[3]);
    return true;
  }

  static __device__ __forceinline__ void decode(const QuantView& v, const float* t, uint64_t row, uint64_t k0, float (&out)[kItem]) {
    decode_word(v, t, row, k0, load(v, code_offset(v, row, k0, kBits)), out);
  }
};

}  // namespace iris::dev
