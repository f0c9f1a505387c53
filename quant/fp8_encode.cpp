// Fast FP8 encoding: the oracle's rules (fp8_ref.cpp) in loops the compiler vectorises.
// The amax of a unit is an unsigned max over |x| bits (NaN mapped to 0); codes come from
// e4m3_encode, which saturates, so the clamp to +-448 is part of it.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include <vector>

#include "common/parallel_for.h"
#include "quant/avx2.h"
#include "quant/fp8.h"
#include "quant/fp8_avx2.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

float fp8_multiplier(float amax) {
  const float recip = 1.0f / amax;  // torch's `448 / amax` is reciprocal(amax) * 448
  return amax > 0 ? std::min(448.0f * recip, FLT_MAX) : 1.0f;
}

namespace {

float unit_mul(uint32_t amax_bits) { return fp8_multiplier(f32_from_bits(amax_bits)); }

// Max |x| bits (NaN ignored) of x[0, count).
template <typename T>
IRIS_INLINE uint32_t amax_bits(const T* x, uint64_t count) {
  uint32_t amax = 0;
  for (uint64_t c = 0; c < count; ++c) {
    amax = std::max(amax, detail::abs_bits_no_nan(detail::load_f32(x[c])));
  }
  return amax;
}

template <typename T>
IRIS_INLINE void encode_run(const T* x, uint64_t count, float mul, uint8_t* out) {
  for (uint64_t c = 0; c < count; ++c) out[c] = e4m3_encode(detail::load_f32(x[c]) * mul);
}

// encode_run that also writes what fp8_decode gives back for each code: the same FP32
// product of the code's value (e4m3_round: branch-free, so the loop stays vectorised) and the
// stored scale (1 / mul), canonical NaN for NaN codes.
IRIS_INLINE void encode_run_decoded(const float* x, uint64_t count, float mul, float scale, uint8_t* out, float* decoded) {
  for (uint64_t c = 0; c < count; ++c) {
    const float y = x[c] * mul;
    out[c] = e4m3_encode(y);
    decoded[c] = canonical_nan_if_nan(e4m3_round(y) * scale);
  }
}

#ifdef IRIS_X86_INTRINSICS
// encode_any on AVX2, 8 values at a time (fp8_avx2.h: the same bits); the compiler's AVX2
// clone of the scalar loop ran at 1 GB/s (E4M3 rounding's per-lane shifts and selects), this
// at about 2.5 (docs/BENCHMARKS.md). The tail goes through the scalar rules.
template <typename T>
IRIS_AVX2 void encode_any_avx2(const T* x, uint64_t count, float mul, float scale, uint8_t* out, float* decoded) {
  const __m256 vm = _mm256_set1_ps(mul), vs = _mm256_set1_ps(scale);
  uint64_t c = 0;
  for (; c + 8 <= count; c += 8) {
    const __m256 d = detail::encode8(detail::load8(x + c), vm, vs, out + c);
    if (decoded) _mm256_storeu_ps(decoded + c, d);
  }
  for (; c < count; ++c) {
    const float y = detail::load_f32(x[c]) * mul;
    out[c] = e4m3_encode(y);
    if (decoded) decoded[c] = canonical_nan_if_nan(e4m3_round(y) * scale);
  }
}
#endif

// One run of `count` values: codes, and with decoded != null their decoded values too.
template <typename T>
IRIS_INLINE void encode_any(const T* x, uint64_t count, float mul, float scale, uint8_t* out, float* decoded) {
#ifdef IRIS_X86_INTRINSICS
  if (count >= 8 && detail::cpu_path() == detail::CpuPath::kAvx2) return encode_any_avx2(x, count, mul, scale, out, decoded);
#endif
  if constexpr (std::is_same_v<T, float>) {
    if (decoded) return encode_run_decoded(x, count, mul, scale, out, decoded);
  }
  encode_run(x, count, mul, out);
}

// Max |x| bits over rows [r0, r1) x all k columns (kTensor, kChannel).
template <typename T>
IRIS_INLINE uint32_t rows_amax_bits_body(const T* m, uint64_t k, uint64_t r0, uint64_t r1) {
  uint32_t amax = 0;
  for (uint64_t r = r0; r < r1; ++r) amax = std::max(amax, amax_bits(m + r * k, k));
  return amax;
}
IRIS_HOT_LOOP_CLONES((template <typename T>), (<T>), uint32_t, rows_amax_bits,
                     (const T* m, uint64_t k, uint64_t r0, uint64_t r1),
                     (m, k, r0, r1))

template <typename T>
IRIS_INLINE void rows_encode_body(const T* m, uint64_t k, uint64_t r0, uint64_t r1, float mul, float scale, uint8_t* codes, float* decoded) {
  for (uint64_t r = r0; r < r1; ++r) encode_any(m + r * k, k, mul, scale, codes + r * k, decoded ? decoded + r * k : nullptr);
}
IRIS_HOT_LOOP_CLONES((template <typename T>), (<T>), void, rows_encode,
                     (const T* m, uint64_t k, uint64_t r0, uint64_t r1, float mul, float scale, uint8_t* codes, float* decoded),
                     (m, k, r0, r1, mul, scale, codes, decoded))

// kBlock: tiles [j0, j1) (at most kMaxRun) of the band of rows [r0, r1). The amax pass reads
// whole row segments across the run of tiles (contiguous, so the prefetchers stream them; a
// tile-by-tile walk defeats them), and the encode pass finds the data still in cache.
constexpr uint64_t kMaxRun = 64;
template <typename T>
IRIS_INLINE void encode_band_body(const T* m, uint64_t k, uint64_t r0, uint64_t r1, uint64_t bk, uint64_t j0, uint64_t j1, float* scales,
                               uint8_t* codes, float* decoded) {
  uint32_t amax[kMaxRun] = {};
  float mul[kMaxRun];
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t j = j0; j < j1; ++j) {
      const uint64_t c0 = j * bk, c1 = std::min(k, c0 + bk);
      amax[j - j0] = std::max(amax[j - j0], amax_bits(m + r * k + c0, c1 - c0));
    }
  for (uint64_t j = j0; j < j1; ++j) {
    mul[j - j0] = unit_mul(amax[j - j0]);
    scales[j] = 1.0f / mul[j - j0];
  }
  for (uint64_t r = r0; r < r1; ++r)
    for (uint64_t j = j0; j < j1; ++j) {
      const uint64_t c0 = j * bk, c1 = std::min(k, c0 + bk);
      encode_any(m + r * k + c0, c1 - c0, mul[j - j0], scales[j], codes + r * k + c0, decoded ? decoded + r * k + c0 : nullptr);
    }
}
IRIS_HOT_LOOP_CLONES((template <typename T>), (<T>), void, encode_band,
                     (const T* m, uint64_t k, uint64_t r0, uint64_t r1, uint64_t bk, uint64_t j0, uint64_t j1, float* scales, uint8_t* codes, float* decoded),
                     (m, k, r0, r1, bk, j0, j1, scales, codes, decoded))

// One [n, k] matrix.
template <typename T>
void encode_matrix(const T* m, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes, float* scales,
                   float* decoded) {
  if (g == Fp8Granularity::kTensor) {
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, (1 << 16) / std::max<uint64_t>(k, 1));
    const int64_t chunks = int64_t((n + rows_per_chunk - 1) / rows_per_chunk);
    std::vector<uint32_t> amaxes(static_cast<size_t>(chunks));
    parallel_for(chunks, 2, [&](int64_t c) {  // a chunk: 64K values
      const uint64_t r0 = uint64_t(c) * rows_per_chunk;
      amaxes[size_t(c)] = rows_amax_bits(m, k, r0, std::min(n, r0 + rows_per_chunk));
    });
    const float mul = unit_mul(amaxes.empty() ? 0 : *std::max_element(amaxes.begin(), amaxes.end()));
    scales[0] = 1.0f / mul;
    parallel_for(chunks, 2, [&](int64_t c) {
      const uint64_t r0 = uint64_t(c) * rows_per_chunk;
      rows_encode(m, k, r0, std::min(n, r0 + rows_per_chunk), mul, scales[0], codes, decoded);
    });
    return;
  }
  if (g == Fp8Granularity::kChannel) {
    parallel_for(int64_t(n), int64_t(std::max<uint64_t>(1, kGrainValues / std::max<uint64_t>(k, 1))), [&](int64_t r) {
      const float mul = unit_mul(rows_amax_bits(m, k, uint64_t(r), uint64_t(r) + 1));
      scales[r] = 1.0f / mul;
      rows_encode(m, k, uint64_t(r), uint64_t(r) + 1, mul, scales[r], codes, decoded);
    });
    return;
  }
  // kBlock: work units of one band of bn rows x a run of tiles about 1024 columns wide.
  const uint64_t gn = (n + bn - 1) / bn, gk = (k + bk - 1) / bk, run = std::clamp<uint64_t>(1024 / bk, 1, kMaxRun);
  const uint64_t runs = (gk + run - 1) / run;
  parallel_for(int64_t(gn * runs), 1, [&](int64_t u) {  // a unit: bn rows x ~1024 columns
    const uint64_t i = uint64_t(u) / runs, j0 = uint64_t(u) % runs * run;
    encode_band(m, k, i * bn, std::min(n, (i + 1) * bn), bk, j0, std::min(gk, j0 + run), scales + i * gk, codes, decoded);
  });
}

template <typename T>
void encode(const T* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes,
            float* scales, float* decoded = nullptr) {
  if (g == Fp8Granularity::kGroup) return;  // not an encoder target (fp8.h)
  const uint64_t per = fp8_scale_count(1, n, k, g, bn, bk);
  for (uint64_t b = 0; b < batch; ++b)
    encode_matrix(in + b * n * k, n, k, g, bn, bk, codes + b * n * k, scales + b * per, decoded ? decoded + b * n * k : nullptr);
}

}  // namespace

void fp8_encode(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk, uint8_t* codes,
                float* scales) {
  encode(in, batch, n, k, g, bn, bk, codes, scales);
}

void fp8_encode_decoded(const float* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk,
                        uint8_t* codes, float* scales, float* decoded) {
  encode(in, batch, n, k, g, bn, bk, codes, scales, decoded);
}

IRIS_INLINE void fp8_encode_unit_body(const float* in, uint64_t count, float mul, uint8_t* codes, float* decoded) {
  encode_any(in, count, mul, 1.0f / mul, codes, decoded);  // the scale fp8_encode stores
}
IRIS_HOT_LOOP_CLONES((), (), void, fp8_encode_unit,
                     (const float* in, uint64_t count, float mul, uint8_t* codes, float* decoded),
                     (in, count, mul, codes, decoded))

void fp8_encode_bf16(const uint16_t* in, uint64_t batch, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn, uint64_t bk,
                     uint8_t* codes, float* scales) {
  encode(in, batch, n, k, g, bn, bk, codes, scales);
}

}  // namespace iris::quant
