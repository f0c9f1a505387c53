// FP8 E4M3 ("fn") weights with tensor, channel, block or group scales (FORMATS.md section 4).
// `batch` matrices of [n, k], row-major, one code byte per element.
#pragma once

#include <cstdint>

#include "quant/element_encode.h"
#include "quant/error_sums.h"

namespace iris::quant {

enum class Fp8Granularity {
  kTensor,   // one scale per matrix: scales[b]
  kChannel,  // one per row: scales[b * n + r]
  kBlock,    // block_n x block_k tiles: scales[b][ceil(n/block_n)][ceil(k/block_k)]; edge tiles partial
  kGroup,    // group elements of a row: scales[b][n][ceil(k/group)] (decoding only)
};
enum class ScaleType { kF32, kBf16, kF16 };

struct Fp8Scales {
  Fp8Granularity granularity = Fp8Granularity::kTensor;
  const void* data = nullptr;
  ScaleType type = ScaleType::kF32;
  uint64_t block_n = 128, block_k = 128;  // kBlock
  uint64_t group = 128;                   // kGroup
};

// ---- Decoding: w = e4m3(q) * scale, one FP32 product (DeepSeek / HF fine-grained FP8:
// `weight.float() * weight_scale_inv`). NaN codes (0x7F, 0xFF) give the canonical NaN.
//
// BF16 scales (compressed-tensors, FORMATS.md 4.3(b)) are widened exactly to FP32 and the
// product is the same FP32 product. compressed-tensors multiplies in BF16
// (`q.to(bf16) * scale`): torch computes that as the FP32 product of the two BF16 values,
// rounded once to BF16. The FP32 product is exact (4 significant bits times 8 fit in FP32's
// 24) unless it falls below 2^-126, so the BF16 output of this decode (fp8_decode_bf16) is
// bit for bit compressed-tensors' weight; the FP32 output is that value before its rounding.
// (tests/quant checks the single rounding over every code and every BF16 scale.)

// Scale of element (matrix b, row r, column c), as FP32 (BF16/F16 scales widen exactly).
float fp8_scale_at(const Fp8Scales& s, uint64_t n, uint64_t k, uint64_t b, uint64_t r, uint64_t c);

// The oracle: one element at a time.
void fp8_decode_ref(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out);
// The same bits, vectorised, rows in parallel (common/parallel_for.h); FP32 or BF16 output (rounded once).
void fp8_decode(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out);
void fp8_decode_bf16(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, uint16_t* out);
// Rows [row0, row1) of the batch * n rows (row = b * n + r); `codes` and `out` hold only those rows.
void fp8_decode_rows(const uint8_t* codes, uint64_t row0, uint64_t row1, uint64_t n, uint64_t k, const Fp8Scales& s, float* out);

// ---- Encoding with FP32 scales (tensor, channel or block; not group), the way transformers'
// FineGrained FP8 (Fp8Quantize) does it per scaling unit, all in FP32:
//   amax = max |x| over the unit (NaN ignored: a NaN element gets code 0x7F, the rest of its
//          unit is encoded normally; torch's amax would make the whole unit NaN)
//   mul  = 448 * (1 / amax)      (torch's `448 / amax` is reciprocal(amax) * 448: two roundings;
//                                 it decides some ties, see tests/quant)
//   q    = e4m3_encode(clamp(x * mul, -448, 448))   (round to nearest even, NaN -> 0x7F)
//   scale = 1 / mul              (stored scale: w ~= e4m3(q) * scale)
// An all-zero unit gets mul = 1: codes 0 and scale 1 (what current transformers writes; its
// older quantizer produced NaN there). Where 448 / amax overflows (amax < 1.3e-36, or amax
// subnormal) mul is clamped to FLT_MAX, so no Inf * 0 = NaN appears (torch would write NaN
// codes for the zeros of such a unit). An Inf element gives amax = Inf, mul = 0: every code
// of its unit 0 (the Inf itself 0x7F) and scale Inf. count_nonfinite (quant/nonfinite.h)
// lets a caller refuse such input first.
//
// The oracle (exhaustive nearest-value rounding):
void fp8_encode_ref(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                    uint64_t block_k, uint8_t* codes, float* scales);
// The same bytes, vectorised, units in parallel (common/parallel_for.h); FP32 or BF16 input.
void fp8_encode(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                uint64_t block_k, uint8_t* codes, float* scales);
void fp8_encode_bf16(const uint16_t* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                     uint64_t block_k, uint8_t* codes, float* scales);
// fp8_encode that also writes, in `decoded` (batch x n x k), exactly what fp8_decode gives
// back for the codes and scales it wrote: the quality report's decoded values without a
// second pass over the codes (tests/quant checks the bits).
void fp8_encode_decoded(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n,
                        uint64_t block_k, uint8_t* codes, float* scales, float* decoded);
// fp8_encode of one [rows, k] matrix, per channel or per block only, on one thread, that also
// adds to `sums` exactly what add_error_sums (quant/error_sums.h) adds for the input values
// (as FP32) against the decoded values fp8_encode_decoded writes, the same bits, in one pass
// over the input for the codes and one for the amax, without writing the decoded values:
// what a requantizing converter runs, one piece of rows per core (for blocks, whole bands of
// block_n rows). Returns the number of NaN and Inf inputs (encoded as fp8_encode does), so a
// caller can refuse such input after the fact. Other granularities: nothing written, 0.
uint64_t fp8_encode_sums(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                         uint8_t* codes, float* scales, ErrorSums* sums);
uint64_t fp8_encode_sums_bf16(const uint16_t* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                              uint8_t* codes, float* scales, ErrorSums* sums);
namespace detail {
// Its path for CPUs without AVX-512 (and for k or block_k not a multiple of 16), which tests
// call directly.
uint64_t fp8_encode_sums_portable(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                                  uint8_t* codes, float* scales, ErrorSums* sums);
// Its AVX2 path, forced: false, writing nothing, where the CPU has no AVX2 (the AVX-512 one is
// taken otherwise on an AVX-512 CPU; shapes it cannot take go the portable way).
bool fp8_encode_sums_avx2(const float* in, uint64_t rows, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k,
                          uint8_t* codes, float* scales, ErrorSums* sums, uint64_t* nonfinite);
}  // namespace detail
// One scaling unit's values with its multiplier already known (from fp8_multiplier): the codes
// of in[i] * mul and, unless `decoded` is null, the values fp8_decode gives back for them with
// the stored scale 1 / mul. Serial, for callers that find the amax themselves and run units in
// parallel (the requantizer's per-tensor FP8 over streamed chunks); the bits of fp8_encode's.
void fp8_encode_unit(const float* in, uint64_t count, float mul, uint8_t* codes, float* decoded);
// mul of one scaling unit from its amax, by the rules above (for callers that find the amax
// themselves, e.g. a per-tensor amax over streamed chunks): 448 * (1 / amax) clamped to
// FLT_MAX, 1 for amax = 0. Encode with e4m3_encode(x * mul); store the scale 1 / mul.
float fp8_multiplier(float amax);
// Number of scales the encoder writes (0 for kGroup).
uint64_t fp8_scale_count(uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t block_n, uint64_t block_k);

// The oracle's element rounding (e4m3_encode in element_encode.h is the fast form): the
// nearest E4M3 value by exhaustive comparison in double, ties to the even code, saturating
// at +-448 (Inf too), NaN -> 0x7F, the sign of zero kept.
uint8_t e4m3_encode_ref(float x);

}  // namespace iris::quant
