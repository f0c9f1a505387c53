// Table lookup of packed 4-bit codes, the inner loop of the NF4/FP4 and MXFP4 decoders: each
// code picks one of 16 precomputed FP32 values. Internal to quant/*.cpp.
#pragma once

#include <cstdint>

namespace iris::quant::detail {

// Which nibble of a byte holds the earlier element: bitsandbytes packs high first, MXFP4
// low first.
enum class NibbleOrder { kHighFirst, kLowFirst };

// out[2j] and out[2j + 1] = lut[the two codes of bytes[j]], j < nbytes, in `order`. Copies the
// table's bits (no arithmetic), so every path gives the same output. AVX-512 (a permute
// per 16 values) or else AVX2 (two per 8) where the CPU has it, chosen at run time; plain
// lookups otherwise.
void lookup_nibbles(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out);
// Its AVX2 path, forced (for tests on AVX-512 CPUs): false, writing nothing, without AVX2.
bool lookup_nibbles_avx2(const uint8_t* bytes, uint64_t nbytes, const float* lut, NibbleOrder order, float* out);

}  // namespace iris::quant::detail
