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
