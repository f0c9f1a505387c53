// FP8 E4M3 weights with tensor, channel, block or group scales (FORMATS.md section 4).
#pragma once

#include <cstdint>

namespace iris::quant {

enum class Fp8Granularity { kTensor, kChannel, kBlock, kGroup };
enum class ScaleType { kF32, kBf16, kF16 };

struct Fp8Scales {
  Fp8Granularity granularity = Fp8Granularity::kTensor;
  const void* data = nullptr;
  ScaleType type = ScaleType::kF32;
  uint64_t block_n = 128, block_k = 128;  // kBlock
  uint64_t group = 128;                   // kGroup
};

// Scale of element (matrix b, row r, column c) of `batch` matrices of [n, k], as FP32
// (BF16/F16 scales widen exactly).
float fp8_scale_at(const Fp8Scales& s, uint64_t n, uint64_t k, uint64_t b, uint64_t r, uint64_t c);

// w = e4m3(q) * scale, one FP32 product. BF16-scaled checkpoints (compressed-tensors)
// multiply in BF16 in torch; that is this product rounded once to BF16, which is exactly
// what a BF16 output of this decode gives.
void fp8_decode_ref(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out);
void fp8_decode(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out);

}  // namespace iris::quant

namespace iris::quant {

// FP32 -> E4M3 "fn": round to nearest even (subnormals included), saturating at +-448;
// NaN -> 0x7F.
uint8_t e4m3_encode(float x);

// Encodes `batch` matrices of [n, k] with one scale per tensor, channel (row) or
// block_n x block_k block (FP32 scales), the way transformers' FineGrained FP8 does per
// block: amax in FP32, mul = 448 * (1 / amax) (torch's scalar / tensor), q = e4m3(clamp(x *
// mul, -448, 448)), stored scale = 1 / mul (so w ~= q * scale). An all-zero unit gets mul = 1
// and scale 1.
void fp8_encode_ref(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                    uint64_t block_k, uint8_t* codes, float* scales);
void fp8_encode(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                uint64_t block_k, uint8_t* codes, float* scales);
uint64_t fp8_scale_count(uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k);

}  // namespace iris::quant
