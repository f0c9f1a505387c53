// MXFP4 (OCP MX: E2M1 elements, one E8M0 scale per 32) as gpt-oss stores it.
#pragma once

#include <cstdint>

namespace iris::quant {

// Row-major codes: each row holds ceil(k/32)*16 bytes, element 2j in the LOW nibble of byte
// j; scales: rows x ceil(k/32). Writes rows x k exact FP32 values (scale 0xFF -> NaN).
void mxfp4_decode_ref(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out);
// The same, rows in parallel.
void mxfp4_decode(const uint8_t* codes, const uint8_t* scales, uint64_t rows, uint64_t k, float* out);

}  // namespace iris::quant

namespace iris::quant {

enum class Mxfp4ScaleRule {
  kOcpFloor,  // shared_exp = floor(log2 amax) - 2 (OCP MX v1.0 section 6.3)
  kSearch,    // per block, the floor rule or one above it, whichever has the smaller squared error
};

// E2M1 code of y (already divided by the block scale): round to nearest, ties to the even
// mantissa, saturating at +-6; zero results are +0 (code 0), never -0.
uint8_t e2m1_encode(float y);

// rows x k values -> codes (rows x ceil(k/32)*16 bytes, low nibble first) and E8M0 scales.
// Columns past k pad with zeros. A block holding NaN or Inf gets scale 0xFF (NaN) and zero
// codes; an all-zero block gets scale byte 0 and zero codes.
void mxfp4_encode_ref(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales);
void mxfp4_encode(const float* in, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule, uint8_t* codes, uint8_t* scales);

}  // namespace iris::quant
