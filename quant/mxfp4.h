// MXFP4 (OCP MX: E2M1 elements, one E8M0 scale per 32) in the gpt-oss / HF layout
// (FORMATS.md section 2): row-major [rows, k] with k the input dimension.
//
// Codes: each row holds mxfp4_row_bytes(k) = ceil(k/32)*16 bytes, element 2j in the LOW
// nibble of byte j, element 2j+1 in the high nibble. Scales: mxfp4_row_scales(k) =
// ceil(k/32) E8M0 bytes per row. When k is not a multiple of 32 the row is padded with
// zeros to the next multiple (K_pad); decoders take the logical k and write k values a row.
#pragma once

#include <cstdint>

#include "quant/element_encode.h"
#include "quant/error_sums.h"

namespace iris::quant {

constexpr uint64_t mxfp4_row_scales(uint64_t k) { return (k + 31) / 32; }
constexpr uint64_t mxfp4_row_bytes(uint64_t k) { return mxfp4_row_scales(k) * 16; }

// ---- Decoding: value = e2m1(code) * 2^(scale - 127), exact in FP32. Scale 0xFF -> NaN
// (tables.h); every NaN written is the canonical NaN (common/float_bits.h).

// The oracle: one element at a time.
void mxfp4_decode_ref(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out);
// The same bits, vectorised, blocks in parallel (common/parallel_for.h).
void mxfp4_decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out);
// BF16 output: each exact FP32 value rounded once (nearest even). Exact unless the value
// overflows BF16 (scale bytes >= 253) - BF16 has FP32's exponent range.
void mxfp4_decode_bf16(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, uint16_t* out);

// ---- Encoding.
enum class Mxfp4ScaleRule {
  // OCP MX v1.0 section 6.3: shared_exp = floor(log2 amax) - 2 (from the FP32 exponent bits,
  // subnormal amax included), clamped to >= -127. Values up to 8 * 2^shared_exp saturate to 6.
  kOcpFloor,
  // Per block, the floor rule's exponent e or e + 1, whichever gives the smaller squared
  // error; ties keep e. The error compared is defined exactly (so every implementation makes
  // the same choice): with y_i = fl32(v_i * 2^-e) and y'_i = fl32(v_i * 2^-(e+1)),
  //   S(e)   = sum_i (double(e2m1(code(y_i)))      - double(y_i))^2
  //   S(e+1) = sum_i (2 * double(e2m1(code(y'_i))) - double(y_i))^2
  // i.e. both errors in units of 2^e, squares in double, summed as 8 partial sums over
  // i mod 8 (in order of i), combined ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). e + 1 is taken
  // only if S(e+1) < S(e), and never above 125 (4 * 2^126 = 2^128 would decode to Inf; this
  // only excludes blocks with amax >= 2^127).
  kSearch,
};

// rows x k values -> codes and scales (layout above). Per 32-element block (zero padded):
// amax = 0 -> scale byte 0 and all codes 0; a block holding NaN or +-Inf -> scale 0xFF (NaN
// per OCP) and all codes 0, so the problem stays visible after decoding (count_nonfinite in
// quant/nonfinite.h lets a caller refuse such input first). Elements: y = v * 2^-shared_exp
// (exact: a power of two), e2m1_encode (nearest even, saturating at +-6, zeros as +0).
// The oracle (plain scalar code, exhaustive nearest-value rounding):
void mxfp4_encode_ref(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales);
// The same bytes, vectorised, blocks in parallel (common/parallel_for.h); FP32 or BF16 input.
void mxfp4_encode(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales);
void mxfp4_encode_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales);
// mxfp4_encode that also writes, row-major in `decoded` (rows x k), exactly what
// mxfp4_decode gives back for the codes and scales it wrote: the quality report's decoded
// values without a second pass over the codes (tests/quant checks the bits).
void mxfp4_encode_decoded(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                          float* decoded);

// mxfp4_encode on one thread that also adds to `sums` exactly what add_error_sums
// (quant/error_sums.h) adds for the input values (as FP32) against the values mxfp4_decode
// gives back for the codes and scales written, the same bits, in one pass over the input and
// without writing the decoded values: what a requantizing converter runs, one piece of rows
// per core. Returns the number of blocks holding NaN or Inf (encoded with scale 0xFF, and in
// the sums as add_error_sums takes them), so a caller can refuse such input after the fact.
uint64_t mxfp4_encode_sums(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                           ErrorSums* sums);
uint64_t mxfp4_encode_sums_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                                ErrorSums* sums);
namespace detail {
// Its path for CPUs without AVX-512 (and for k not a multiple of 32), which tests call directly.
uint64_t mxfp4_encode_sums_portable(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                                    ErrorSums* sums);
// Its AVX2 path, forced (an AVX-512 CPU takes the AVX-512 one otherwise): false, writing
// nothing, where the CPU has no AVX2. k not a multiple of 32 takes the portable path.
bool mxfp4_encode_sums_avx2(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales,
                            ErrorSums* sums, uint64_t* nonfinite);
}  // namespace detail

// The oracle's element rounding (e2m1_encode in element_encode.h is the fast form): the
// nearest E2M1 magnitude by exhaustive comparison in double, ties to the even code,
// |y| >= 6 -> 6, NaN -> 0, zero results +0.
uint8_t e2m1_encode_ref(float y);

}  // namespace iris::quant
