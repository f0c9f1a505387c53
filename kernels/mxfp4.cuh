// MXFP4 (OCP E2M1 x E8M0 per 32): decoding 8 elements of a row from 4 code bytes, in the
// archive's nibble order or the uploads' bit-plane order (QuantView::codes_planes).
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/mxfp4_planes.h"
#include "kernels/packed_decode.cuh"

namespace iris::dev {

struct Mxfp4 {
  static constexpr int kItem = 8;  // elements per work item: 4 bytes of codes, one 16-byte bf16 store
  static constexpr uint32_t kBits = 4;
  using Word = uint32_t;

  // The 16 E2M1 values in shared memory: one lookup per element instead of bit arithmetic.
  static __device__ __forceinline__ void load_tables(const QuantView&, float* smem) {
    for (int i = threadIdx.x; i < 16; i += blockDim.x) smem[i] = e2m1(uint32_t(i));
  }

  static __device__ __forceinline__ Word load(const QuantView& v, uint64_t byte_offset) {
    return __ldg(reinterpret_cast<const uint32_t*>(v.codes + byte_offset));
  }

  // Elements [k0, k0 + 8) of `row` (k0 a multiple of 8) from their 4 code bytes.
  static __device__ __forceinline__ void decode_word(const QuantView& v, const float* smem, uint64_t row, uint64_t k0, Word w,
                                                     float (&out)[kItem]) {
    if (v.codes_planes) w = mxfp4_planes_to_word(w);  // the table lookups take nibbles
    const uint64_t kb = (v.k + 31) / 32;
    const float s = e8m0(__ldg(static_cast<const uint8_t*>(v.scales) + row * kb + k0 / 32));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (w >> (8 * j)) & 0xffu;
      out[j * 2 + 0] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte & 15u], s));  // low nibble = even element
      out[j * 2 + 1] = iris::canonical_nan_if_nan(__fmul_rn(smem[byte >> 4], s));
    }
  }

  // BF16 fast path (dequant v4): the scale byte of elements [k0, k0 + 8), loaded with the codes.
  using Aux = uint32_t;
  static __device__ __forceinline__ bool tables_finite(const QuantView&, const float*) { return true; }
  static __device__ __forceinline__ Aux load_aux(const QuantView& v, const float*, uint64_t row, uint64_t k0) {
    return __ldg(static_cast<const uint8_t*>(v.scales) + row * ((v.k + 31) / 32) + k0 / 32);
  }
  // Eight elements as four bf16x2, bit-identical to the FP32 reference rounded to BF16 (the
  // products are exact, see packed_decode.cuh); scale 0xFF gives the canonical NaN.
  static __device__ __forceinline__ bool decode_bf16(const QuantView& v, Word w, Aux e, const float*, bool, uint4& out) {
    if (e == 0xffu) {
      out = make_uint4(kBf16x2CanonicalNan, kBf16x2CanonicalNan, kBf16x2CanonicalNan, kBf16x2CanonicalNan);
      return true;
    }
    uint32_t r[4];
    if (v.codes_planes) {  // the uploads' order: each pair one shift and one AND (three of them)
      const E8m0Factors f = e8m0_factors(e);
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = apply_e8m0(mxfp4_planes_pair(w, j), f);
    } else {
      e2m1_word_to_bf16x4(w, e8m0_factors(e), r);
    }
    out = make_uint4(r[0], r[1], r[2], r[3]);
    return true;
  }

  static __device__ __forceinline__ void decode(const QuantView& v, const float* t, uint64_t row, uint64_t k0, float (&out)[kItem]) {
    decode_word(v, t, row, k0, load(v, code_offset(v, row, k0, kBits)), out);
  }
};

}  // namespace iris::dev
