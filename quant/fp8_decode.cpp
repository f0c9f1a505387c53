// Fast FP8 decoding: rows in parallel; along a row the scale is constant over runs of
// columns (the whole row, a block or a group), and each run is one E4M3 -> FP32 conversion
// and one FP32 multiply per element, the same product as the oracle.
#include "common/parallel_for.h"
#include "quant/fp8.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

// e4m3_to_f32 in arithmetic the compiler vectorises (no table lookup, which is a gather): the
// 7 magnitude bits moved into an FP32's exponent and mantissa fields read as 2^(e-127) *
// 1.m (or, for e = 0, the FP32 subnormal m * 2^-129), and scaled by 2^120 to E4M3's bias of 7:
// exact both ways (a power of two times a value that stays normal). 0x7f is NaN; the sign
// goes on last, so -0 stays -0.
IRIS_INLINE float e4m3_value(uint8_t b) {
  const uint32_t mag = b & 0x7fu;
  const float v = f32_from_bits(mag << 20) * 0x1p120f;
  return f32_from_bits((mag == 0x7fu ? kCanonicalNanBits : f32_bits(v)) | (uint32_t(b & 0x80u) << 24));
}

template <typename Out>
IRIS_INLINE void decode_run_body(const uint8_t* q, uint64_t count, float scale, Out* out) {
  for (uint64_t i = 0; i < count; ++i) detail::store_value(&out[i], canonical_nan_if_nan(e4m3_value(q[i]) * scale));
}
IRIS_HOT_LOOP_CLONES((template <typename Out>), (<Out>), void, decode_run,
                     (const uint8_t* q, uint64_t count, float scale, Out* out),
                     (q, count, scale, out))

// Rows [row0, row1) of the batch * n rows; codes and out start at row0.
template <typename Out>
void decode(const uint8_t* codes, uint64_t row0, uint64_t row1, uint64_t n, uint64_t k, const Fp8Scales& s, Out* out) {
  if (k == 0 || n == 0) return;
  // Columns sharing one scale along a row.
  uint64_t run = s.granularity == Fp8Granularity::kBlock ? s.block_k : s.granularity == Fp8Granularity::kGroup ? s.group : k;
  if (run == 0 || run > k) run = k;
  parallel_for(int64_t(row1 - row0), int64_t(std::max<uint64_t>(1, kGrainValues / std::max<uint64_t>(k, 1))), [&](int64_t j) {
    const uint64_t row = row0 + uint64_t(j);
    const uint64_t b = row / n, r = row % n, at = (row - row0) * k;
    for (uint64_t c = 0; c < k; c += run) {
      const uint64_t count = c + run < k ? run : k - c;
      decode_run(codes + at + c, count, fp8_scale_at(s, n, k, b, r, c), out + at + c);
    }
  });
}

}  // namespace

void fp8_decode(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, float* out) {
  decode(codes, 0, batch * n, n, k, s, out);
}

void fp8_decode_rows(const uint8_t* codes, uint64_t row0, uint64_t row1, uint64_t n, uint64_t k, const Fp8Scales& s, float* out) {
  decode(codes, row0, row1, n, k, s, out);
}

void fp8_decode_bf16(const uint8_t* codes, uint64_t batch, uint64_t n, uint64_t k, const Fp8Scales& s, uint16_t* out) {
  decode(codes, 0, batch * n, n, k, s, out);
}

}  // namespace iris::quant
