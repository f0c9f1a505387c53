#include <algorithm>
#include <cmath>

#include "quant/nf4.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace iris::quant {

uint8_t nf4_encode(float x) {
  // bitsandbytes csrc/kernels.cu dQuantizeNF4, the same comparisons in the same order.
  if (x > 0.03979014977812767f) {
    if (x > 0.3893125355243683f) {
      if (x > 0.6427869200706482f) return x > 0.8614784181118011f ? 15 : 14;
      return x > 0.5016634166240692f ? 13 : 12;
    }
    if (x > 0.2035212516784668f) return x > 0.2920137718319893f ? 11 : 10;
    return x > 0.1202552504837513f ? 9 : 8;
  }
  if (x > -0.33967943489551544f) {
    if (x > -0.13791173323988914f) return x > -0.045525018125772476f ? 7 : 6;
    return x > -0.23460740596055984f ? 5 : 4;
  }
  if (x > -0.6106329262256622f) return x > -0.4599952697753906f ? 3 : 2;
  return x > -0.8480964004993439f ? 1 : 0;
}

namespace {
IRIS_INLINE uint8_t nf4_code_fast(float x) {
  // Strict '>' against the ascending midpoints, exactly like the tree; NaN exceeds none -> 0.
  static constexpr float kT[15] = {-0.8480964004993439f, -0.6106329262256622f, -0.4599952697753906f, -0.33967943489551544f,
                                   -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
                                   0.1202552504837513f,  0.2035212516784668f,  0.2920137718319893f,  0.3893125355243683f,
                                   0.5016634166240692f,  0.6427869200706482f,  0.8614784181118011f};
  int c = 0;
  for (int i = 0; i < 15; ++i) c += x > kT[i];
  return uint8_t(c);
}
}  // namespace

uint8_t nf4_encode_fast(float x) { return nf4_code_fast(x); }

uint8_t dynamic_map_encode(float x) {
  // bitsandbytes dQuantize<0>: pivot search over the sorted 256-entry map.
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f;
  float val = dynamic_map_value(uint8_t(pivot));
  for (int i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = dynamic_map_value(uint8_t(pivot));
  }
  if (upper_pivot == 255) upper = dynamic_map_value(255);
  if (lower_pivot == 0) lower = dynamic_map_value(0);
  if (x > val) {
    const float midpoint = (upper + val) * 0.5f;
    return uint8_t(x > midpoint ? upper_pivot : pivot);
  }
  const float midpoint = (lower + val) * 0.5f;
  return uint8_t(x < midpoint ? lower_pivot : pivot);
}

namespace {

constexpr uint64_t kBlock = 64, kNested = 256;

// First level: absmax and codes of blocks [b0, b1).
template <uint8_t (*Encode)(float)>
IRIS_HOT_LOOP void quantize_blocks(const float* in, uint64_t n, uint64_t b0, uint64_t b1, float* absmax, uint8_t* codes) {
  for (uint64_t b = b0; b < b1; ++b) {
    const uint64_t i0 = b * kBlock, i1 = std::min(n, i0 + kBlock);
    float amax = -3.40282347e38f;  // bnb starts from -FLT_MAX and takes fmaxf
    for (uint64_t i = i0; i < i1; ++i) amax = max_abs(amax, in[i]);
    absmax[b] = amax;
    const float inv = 1.0f / amax;  // reciprocal, then multiply (an all-zero block gives 0 * inf = NaN -> code 0)
    for (uint64_t i = i0; i < i0 + kBlock; i += 2) {
      if (i >= n) break;
      const uint8_t hi = Encode(in[i] * inv);
      // A missing last element is loaded as 0 by bnb, then normalized like the others.
      const uint8_t lo = Encode((i + 1 < n ? in[i + 1] : 0.0f) * inv);
      codes[i / 2] = uint8_t((hi << 4) | lo);
    }
  }
}

// Second level over the absmax values, once their mean is known.
void quantize_nested(const float* absmax, uint64_t nabs, float offset, uint64_t j0, uint64_t j1, uint8_t* qabs, float* nested) {
  for (uint64_t j = j0; j < j1; ++j) {
    const uint64_t a0 = j * kNested, a1 = std::min(nabs, a0 + kNested);
    float amax = -3.40282347e38f;
    for (uint64_t a = a0; a < a1; ++a) amax = std::fmax(amax, std::fabs(absmax[a] - offset));
    nested[j] = amax;
    const float inv = 1.0f / amax;
    for (uint64_t a = a0; a < a1; ++a) qabs[a] = dynamic_map_encode((absmax[a] - offset) * inv);
  }
}

// torch.mean of a float32 CUDA tensor; summed in double here. (tests/quant compares the
// result with the offsets bitsandbytes stored in the fixture.)
float mean_of(const float* v, uint64_t n) {
  double s = 0;
  for (uint64_t i = 0; i < n; ++i) s += v[i];
  return n ? float(s / double(n)) : 0.f;
}

void encode(const float* in, uint64_t n, Nf4DoubleQuant* out, bool parallel) {
  const uint64_t nabs = (n + kBlock - 1) / kBlock, nnest = (nabs + kNested - 1) / kNested;
  std::vector<float> absmax(nabs);
  out->codes.assign((n + 1) / 2, 0);
  out->absmax_codes.assign(nabs, 0);
  out->nested_absmax.assign(nnest, 0.f);
  const int64_t chunks = int64_t((nabs + 255) / 256);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c)
    if (parallel) quantize_blocks<nf4_code_fast>(in, n, uint64_t(c) * 256, std::min(nabs, uint64_t(c + 1) * 256), absmax.data(), out->codes.data());
    else quantize_blocks<nf4_encode>(in, n, uint64_t(c) * 256, std::min(nabs, uint64_t(c + 1) * 256), absmax.data(), out->codes.data());
  out->offset = mean_of(absmax.data(), nabs);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j = 0; j < int64_t(nnest); ++j)
    quantize_nested(absmax.data(), nabs, out->offset, uint64_t(j), uint64_t(j) + 1, out->absmax_codes.data(), out->nested_absmax.data());
}

}  // namespace

void nf4_block_absmax(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, float* absmax) {
  const int64_t b0 = int64_t(i0 / kBlock), b1 = int64_t((i0 + count + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = b0; b < b1; ++b) {
    float amax = -3.40282347e38f;
    for (uint64_t i = uint64_t(b) * kBlock; i < std::min(n, uint64_t(b + 1) * kBlock); ++i) amax = max_abs(amax, chunk[i - i0]);
    absmax[b] = amax;
  }
}

void nf4_quantize_absmax(const float* absmax, uint64_t nabs, Nf4DoubleQuant* out) {
  const uint64_t nnest = (nabs + kNested - 1) / kNested;
  out->absmax_codes.assign(nabs, 0);
  out->nested_absmax.assign(nnest, 0.f);
  out->offset = mean_of(absmax, nabs);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < int64_t(nnest); ++j)
    quantize_nested(absmax, nabs, out->offset, uint64_t(j), uint64_t(j) + 1, out->absmax_codes.data(), out->nested_absmax.data());
}

IRIS_HOT_LOOP void nf4_encode_codes(const float* chunk, uint64_t i0, uint64_t count, uint64_t n, const float* absmax, uint8_t* codes) {
  const int64_t b0 = int64_t(i0 / kBlock), b1 = int64_t((i0 + count + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = b0; b < b1; ++b) {
    const float inv = 1.0f / absmax[b];
    for (uint64_t i = uint64_t(b) * kBlock; i < std::min(n, uint64_t(b + 1) * kBlock); i += 2) {
      const uint8_t hi = nf4_code_fast(chunk[i - i0] * inv);
      const uint8_t lo = nf4_code_fast((i + 1 < n ? chunk[i + 1 - i0] : 0.0f) * inv);
      codes[(i - i0) / 2] = uint8_t((hi << 4) | lo);
    }
  }
}

void nf4_encode_dq_ref(const float* in, uint64_t n, Nf4DoubleQuant* out) { encode(in, n, out, false); }
void nf4_encode_dq(const float* in, uint64_t n, Nf4DoubleQuant* out) { encode(in, n, out, true); }

}  // namespace iris::quant
