// Arithmetic the decode kernels (the MoE router, one-query attention) share with their CPU
// references, so a kernel and its reference give the same bits: every step is an IEEE
// operation or an explicit fmaf, nothing the compiler may contract or approximate (the CUDA
// build passes --fmad=false; the references compile with -ffp-contract=off).
#pragma once

#include <cmath>
#include <cstdint>

#include "common/float_bits.h"

namespace iris {

// e^x to within 2 ulp, the same bits on the CPU and the GPU (the library expf of each differ).
// Cody-Waite: x = n ln2 + r with |r| <= ln2 / 2, a degree-7 Taylor polynomial of e^r
// (truncation below 6e-9 relative), times 2^n made from its bits. Results below FLT_MIN are
// flushed to 0: a softmax weight that small vanishes in any sum it joins.
IRIS_HD float exp_same_bits(float x) {
  if (x != x) return x;
  if (x > 88.72283935546875f) return f32_from_bits(0x7f800000u);
  if (x < -87.33654022216797f) return 0.0f;
  const float n = rintf(x * 1.44269502162933349609375f);  // to nearest even, on both
  float r = fmaf(-n, 0.693145751953125f, x);  // ln2's top bits: n * this is exact
  r = fmaf(-n, 1.428606765330187045e-06f, r);  // the rest of ln2
  float p = 1.0f / 5040.0f;
  p = fmaf(p, r, 1.0f / 720.0f);
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  // 2^n as two factors, so that n = 128 (x just under the overflow bound) stays finite.
  const int half = int(n) / 2;
  const float a = f32_from_bits(uint32_t(half + 127) << 23);
  const float b = f32_from_bits(uint32_t(int(n) - half + 127) << 23);
  return (p * a) * b;
}

// An output rounded to BF16, a NaN as the one canonical quiet NaN (0x7fc0): the GPU's NaNs
// carry other payloads than the CPU's.
// From sm_80 the GPU rounds with one conversion instruction (cvt.rn.bf16.f32: round to nearest
// even, subnormals kept, overflow to infinity -- the same bits as f32_to_bf16 for every
// number) instead of f32_to_bf16's integer sequence: a kernel that rounds every element several
// times (residual_norm) was slower than Inductor's with the sequence and faster with the
// instruction (kernels/NOTES.md run v48).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define IRIS_DECODE_BF16_CVT 1
__device__ __forceinline__ uint16_t bf16_cvt_rn(float v) {
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(v));
  return b;
}
#endif

IRIS_HD uint16_t bf16_output(float v) {
#ifdef IRIS_DECODE_BF16_CVT
  const uint16_t b = bf16_cvt_rn(v);
  return v != v ? uint16_t(0x7fc0) : b;
#else
  return f32_to_bf16(canonical_nan_if_nan(v));
#endif
}

// v rounded to BF16 and back: where the arithmetic mirrors a step of transformers' on BF16
// tensors (each op rounds its result to BF16). A NaN stays a NaN (its payload may differ
// between the CPU and the GPU; every output goes through bf16_output, which canonicalises).
IRIS_HD float bf16_round(float v) {
#ifdef IRIS_DECODE_BF16_CVT
  return f32_from_bits(uint32_t(bf16_cvt_rn(v)) << 16);
#else
  return bf16_to_f32(bf16_output(v));
#endif
}

// One element of the residual step (ResidualNormArgs): the term v of y, plus its bias element
// b (has_bias), times its factor w (has_weight), each step rounded to BF16 as transformers'
// BF16 ops round it.
IRIS_HD float residual_term(float v, bool has_bias, float b, bool has_weight, float w) {
  if (has_bias) v = bf16_round(v + b);
  if (has_weight) v = bf16_round(v * w);
  return v;
}

// Element d of a vector rotated by rotary positions (rotate_half form): x[d] * cos[d] +
// r * sin[d], r = -x[d + half] below half and x[d - half] above (`partner` is that element),
// the product x * cos exact in FP32 (two BF16s), the sum fused, rounded once to BF16.
IRIS_HD float rope_element(float x, float partner, bool low_half, float c, float s) {
  return bf16_round(fmaf(low_half ? -partner : partner, s, x * c));
}

// The norm's output element: t = x' * r times the norm weight, in FP32 (gpt-oss) or after
// rounding t to BF16 (Llama), rounded to BF16.
IRIS_HD uint16_t rms_norm_output(float t, float w, bool weight_in_f32) {
  return bf16_output(weight_in_f32 ? w * t : w * bf16_round(t));
}

// gpt-oss's clamped SwiGLU of one (gate, up) pair of an expert's gate_up outputs, as
// transformers' GptOssExperts computes it on BF16 tensors (each op rounds its result to BF16):
// g = bf16(bf16(gate_sum) + bias_g), u likewise (the GEMV's BF16 output plus its bias, where
// has_bias); g clamped above at limit, u to [-limit, limit] (the
// bound rounded to BF16 as torch.clamp's result is; NaN passes); then
// bf16(bf16(u + 1) * bf16(g * bf16(1 / (1 + exp(-bf16(g * alpha)))))) with exp_same_bits for
// the exponential (torch's sigmoid uses the library expf: within 1 BF16 ulp, docs/API.md).
IRIS_HD uint16_t clamped_swiglu(float gate_sum, float up_sum, bool has_bias, float bias_g, float bias_u, float alpha, float limit) {
  float g = bf16_round(gate_sum), u = bf16_round(up_sum);
  if (has_bias) g = bf16_round(g + bias_g), u = bf16_round(u + bias_u);
  const float hi = bf16_round(limit), lo = -hi;
  g = g > hi ? hi : g;
  u = u > hi ? hi : (u < lo ? lo : u);
  const float e = exp_same_bits(-bf16_round(g * alpha));
  // 1 / d correctly rounded: the GPU's reciprocal instruction (rcp.rn) gives the same bits as
  // the IEEE division, in fewer instructions.
  const float d = 1.0f + e;
#ifdef __CUDA_ARCH__
  const float sig = bf16_round(__frcp_rn(d));
#else
  const float sig = bf16_round(1.0f / d);
#endif
  return bf16_output(bf16_round(u + 1.0f) * bf16_round(g * sig));
}

// A gated MLP's activation (Llama, Mistral, Qwen2, Mixtral's experts: act(gate) * up with
// act = SiLU) as transformers computes it on BF16 tensors, two roundings: silu(g) = g / (1 +
// e^-g) in FP32 rounded to BF16 (torch's silu kernel; exp_same_bits for its library expf, which
// is within 2 ulp of it, so the BF16 result differs only where the FP32 value lies within 2 ulp
// of a BF16 rounding boundary), then that times u rounded to BF16 (the product of two BF16
// values is exact in FP32, so this is torch's BF16 multiply).
IRIS_HD uint16_t silu_mul(float g, float u) {
  const float d = 1.0f + exp_same_bits(-g);
#ifdef __CUDA_ARCH__
  const float silu = bf16_round(__fdiv_rn(g, d));
#else
  const float silu = bf16_round(g / d);
#endif
  return bf16_output(silu * u);
}

// The order key of a BF16 value for a top-k: larger keys first. NaN is above everything (as
// torch.topk ranks it), -0 equals +0, and every other value keeps its order.
IRIS_HD int32_t topk_key(uint16_t bf16) {
  if ((bf16 & 0x7fffu) > 0x7f80u) return INT32_MAX;
  if ((bf16 & 0x7fffu) == 0) return 0;
  const int32_t magnitude = int32_t(bf16 & 0x7fffu);
  return (bf16 & 0x8000u) ? -magnitude : magnitude;
}

}  // namespace iris
