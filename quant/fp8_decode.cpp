// Fast FP8 decoding: rows in parallel; along a row the scale is constant over runs of
// columns (the whole row, a block or a group), and each run is a table lookup and one FP32
// multiply per element, the same product as the oracle.
#include <array>

#include "quant/fp8.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

namespace {

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = e4m3_to_f32(uint8_t(b));
    return t;
  }();
  return table;
}

template <typename Out>
IRIS_HOT_LOOP void decode_run(const uint8_t* q, uint64_t count, float scale, const float* table, Out* out) {
  for (uint64_t i = 0; i < count; ++i) detail::store_value(&out[i], canonical_nan_if_nan(table[q[i]] * scale));
}

// Rows [row0, row1) of the batch * n rows; codes and out start at row0.
template <typename Out>
void decode(const uint8_t* codes, uint64_t row0, uint64_t row1, uint64_t n, uint64_t k, const Fp8Scales& s, Out* out) {
  if (k == 0 || n == 0) return;
  const float* table = e4m3_table().data();
  // Columns sharing one scale along a row.
  uint64_t run = s.granularity == Fp8Granularity::kBlock ? s.block_k : s.granularity == Fp8Granularity::kGroup ? s.group : k;
  if (run == 0 || run > k) run = k;
#pragma omp parallel for schedule(static)
  for (int64_t row = int64_t(row0); row < int64_t(row1); ++row) {
    const uint64_t b = uint64_t(row) / n, r = uint64_t(row) % n, at = (uint64_t(row) - row0) * k;
    for (uint64_t c = 0; c < k; c += run) {
      const uint64_t count = c + run < k ? run : k - c;
      decode_run(codes + at + c, count, fp8_scale_at(s, n, k, b, r, c), table, out + at + c);
    }
  }
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
