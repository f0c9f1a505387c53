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
IRIS_HD uint16_t bf16_output(float v) { return f32_to_bf16(canonical_nan_if_nan(v)); }

// The order key of a BF16 value for a top-k: larger keys first. NaN is above everything (as
// torch.topk ranks it), -0 equals +0, and every other value keeps its order.
IRIS_HD int32_t topk_key(uint16_t bf16) {
  if ((bf16 & 0x7fffu) > 0x7f80u) return INT32_MAX;
  if ((bf16 & 0x7fffu) == 0) return 0;
  const int32_t magnitude = int32_t(bf16 & 0x7fffu);
  return (bf16 & 0x8000u) ? -magnitude : magnitude;
}

}  // namespace iris
