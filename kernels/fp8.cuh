// FP8 E4M3 with tensor, channel, block or group scales: decoding 16 elements of a row.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/packed_decode.cuh"

namespace iris::dev {

struct Fp8 {
  static constexpr int kItem = 8;
  static constexpr uint32_t kBits = 8;

  // No table: a 256-entry shared-memory table is hit at random byte values and serialises on
  // bank conflicts (measured: FP8 GEMV 5x slower than MXFP4's 16-entry table). Bit arithmetic.
  static __device__ __forceinline__ void load_tables(const QuantView&, float*) {}

  static __device__ __forceinline__ float decode_byte(uint32_t b) { return e4m3_to_f32_bits(b); }

  // Scale idx of an array of `type` scales at `base` (v.scales, or a run of it), as FP32.
  static __device__ __forceinline__ float scale_from(ScaleType type, const void* base, uint64_t idx) {
    switch (type) {
      case ScaleType::kF32: return __ldg(static_cast<const float*>(base) + idx);
      case ScaleType::kBf16: return iris::bf16_to_f32(__ldg(static_cast<const uint16_t*>(base) + idx));
      default: return iris::f16_to_f32(__ldg(static_cast<const uint16_t*>(base) + idx));
    }
  }
  static __device__ __forceinline__ uint32_t scale_bytes(ScaleType type) { return type == ScaleType::kF32 ? 4u : 2u; }
  static __device__ __forceinline__ float scale_at(const QuantView& v, uint64_t idx) { return scale_from(v.scale_type, v.scales, idx); }

  // Index of the scale of element (row, k); shifts for the power-of-two block sizes.
  static __device__ __forceinline__ uint64_t scale_index(const QuantView& v, uint64_t row, uint64_t k) {
    switch (v.granularity) {
      case 0: return v.single_matrix ? 0 : row / v.n;  // tensor
      case 1: return row;                              // channel
      case 2: {                                        // block
        const uint64_t b = v.single_matrix ? 0 : row / v.n, r = row - b * v.n;
        const uint64_t gn = div_by(v.n + v.block_n - 1, v.block_n, v.block_n_shift);
        const uint64_t gk = div_by(v.k + v.block_k - 1, v.block_k, v.block_k_shift);
        return (b * gn + div_by(r, v.block_n, v.block_n_shift)) * gk + div_by(k, v.block_k, v.block_k_shift);
      }
      default:  // group
        return row * div_by(v.k + v.group_size - 1, v.group_size, v.group_shift) + div_by(k, v.group_size, v.group_shift);
    }
  }

  // The scale of element (row, k), out of line: only where a block or group edge falls inside
  // an item (block sizes not a multiple of 8), and inlined at each of an item's 8 elements in
  // every batch's unrolled loop it made the FP8 CUDA-core GEMV the build's largest code (its
  // instance files 44% of the kernels' sm_90a compile time, docs/BENCHMARKS.md "The first build").
  static __device__ __noinline__ float element_scale(const QuantView& v, uint64_t row, uint64_t k) {
    return scale_at(v, scale_index(v, row, k));
  }

  using Word = uint2;

  static __device__ __forceinline__ Word load(const QuantView& v, uint64_t byte_offset) {
    return __ldg(reinterpret_cast<const uint2*>(v.codes + byte_offset));
  }

  static __device__ __forceinline__ void decode_word(const QuantView& v, const float* smem, uint64_t row, uint64_t k0, Word w,
                                                     float (&out)[kItem]) {
    // One scale for the 8 elements unless a block/group edge falls inside them.
    const bool uniform = v.fp8_uniform8;  // decided on the host: a 64-bit modulo per item was a third of the time
    const float s0 = scale_at(v, scale_index(v, row, k0));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float s = uniform || k0 + i >= v.k ? s0 : element_scale(v, row, k0 + i);
      const uint32_t word = i < 4 ? w.x : w.y;
      out[i] = iris::canonical_nan_if_nan(__fmul_rn(decode_byte((word >> (8 * (i % 4))) & 0xffu), s));
    }
  }

  // BF16 fast path (dequant v4): the scale of elements [k0, k0 + 8) when one covers them all.
  using Aux = float;
  static __device__ __forceinline__ bool tables_finite(const QuantView&, const float*) { return true; }
  static __device__ __forceinline__ Aux load_aux(const QuantView& v, const float*, uint64_t row, uint64_t k0) {
    return scale_at(v, scale_index(v, row, k0));
  }
  // Exact E4M3 values times a finite scale in FP32, rounded by cvt.rn.bf16x2: equal to the
  // reference. NaN codes are patched to the canonical NaN without a branch (a random byte is
  // a NaN code 2 times in 256, so 6% of items hold one); a non-finite scale, or scales that
  // change inside the 8 elements, go to the scalar path.
  static __device__ __forceinline__ bool decode_bf16(const QuantView& v, Word w, Aux s, const float*, bool, uint4& out) {
    if (!v.fp8_uniform8 || !isfinite(s)) return false;
    uint32_t r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t word = j < 2 ? w.x : w.y;
      float lo, hi;
      e4m3x2_to_f32(j % 2 ? word >> 16 : word, lo, hi);
      const uint32_t nan = e4m3_nan_bytes(word);  // 0x80 in NaN bytes
      // 0xFFFF in the halves whose byte is a NaN code (PRMT replicates each byte's sign bit).
      const uint32_t mask = prmt(nan, 0u, j % 2 ? 0xBBAAu : 0x9988u);
      r[j] = (pack_bf16x2(__fmul_rn(lo, s), __fmul_rn(hi, s)) & ~mask) | (0x7FC07FC0u & mask);
    }
    out = make_uint4(r[0], r[1], r[2], r[3]);
    return true;
  }

  static __device__ __forceinline__ void decode(const QuantView& v, const float* t, uint64_t row, uint64_t k0, float (&out)[kItem]) {
    decode_word(v, t, row, k0, load(v, code_offset(v, row, k0, kBits)), out);
  }
};

}  // namespace iris::dev
