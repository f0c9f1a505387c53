// NVFP4 (quant/nvfp4.h) against oracles written here from the tools' source: ModelOpt's
// _cast_fp4 as searchsorted over the E2M1 midpoints plus its odd-midpoint correction, the
// block scale through the exhaustive E4M3 oracle (e4m3_encode_ref), and each tool's
// dequantization as three FP32 operations -- on fresh random rows and hostile values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/float_bits.h"
#include "quant/fp8.h"
#include "quant/nvfp4.h"
#include "quant/tables.h"
#include "test_util.h"

namespace iris::quant {
namespace {

// ModelOpt's _cast_fp4: ord = torch.searchsorted(bounds, |y|) (left: bounds strictly below,
// NaN past all), + 1 where |y| is one of bounds[1, 3, 5]; sign bit = (y < 0).
uint8_t cast_fp4_oracle(float y) {
  static const float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float a = std::fabs(y);
  uint8_t ord = 0;
  for (float b : bounds) ord += !(b >= a);  // torch's lower bound: !(mid >= value) moves right
  const uint8_t odd = a == bounds[1] || a == bounds[3] || a == bounds[5];
  return uint8_t(((y < 0.f) << 3) + ord + odd);
}

TEST(Nvfp4, ElementCastIsModelOptsOnEveryInterestingValue) {
  std::vector<float> v = {0.f, -0.f, 0.1f, -0.1f, 0.25f, -0.25f, 0.2500001f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 5.0000005f, 6.f, 7.f,
                          -7.f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f};
  std::mt19937 rng(test::seed());
  std::uniform_real_distribution<float> u(-8.f, 8.f);
  for (int i = 0; i < 100000; ++i) v.push_back(u(rng));
  for (float m : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f})  // the midpoints and their neighbours
    for (float y : {m, std::nextafter(m, 0.f), std::nextafter(m, 9.f)}) v.insert(v.end(), {y, -y});
  IRIS_SEED_TRACE();
  for (float y : v) ASSERT_EQ(nvfp4_encode_element(y), cast_fp4_oracle(y)) << y;
}

struct Encoded {
  std::vector<uint8_t> codes, scales;
};

// ModelOpt's NVFP4QTensor.get_weights_scaling_factor + quantize for one matrix (k padded to 16).
Encoded encode_oracle(const std::vector<float>& w, uint64_t rows, uint64_t k, float t) {
  const uint64_t nb = (k + 15) / 16;
  Encoded e{std::vector<uint8_t>(rows * nb * 8, 0), std::vector<uint8_t>(rows * nb)};
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t b = 0; b < nb; ++b) {
      float amax = 0.f;
      for (uint64_t j = b * 16; j < std::min(k, b * 16 + 16); ++j) amax = std::max(amax, std::fabs(w[r * k + j]));
      const float six_t = 6.0f * t;
      float q = amax / six_t;
      if (q == 0.f) q = 1.0f;
      const uint8_t s = e4m3_encode_ref(q);
      e.scales[r * nb + b] = s;
      const float denom = e4m3_to_f32(s) * t;
      // ModelOpt zero-pads the row to whole blocks and quantizes the padding too: 0 / denom,
      // which is code 0 -- except in a block whose E4M3 scale underflowed to 0, where 0 / 0
      // takes code 7. iris writes the padding as code 0 always (FORMAT.md 4.6: both decode to
      // 0); that one difference is left out here.
      for (uint64_t j = b * 16; j < std::min(k, b * 16 + 16); ++j) {
        const float x = w[r * k + j];
        const uint8_t c = cast_fp4_oracle(x / denom);
        e.codes[r * nb * 8 + j / 2] |= uint8_t(c << (4 * (j & 1)));
      }
    }
  return e;
}

TEST(Nvfp4, EncodeIsModelOptsByteForByte) {
  std::mt19937 rng(test::seed());
  IRIS_SEED_TRACE();
  for (uint64_t k : {16u, 32u, 48u, 72u, 200u, 5u}) {
    const uint64_t rows = 9;
    std::vector<float> w = test::random_weights(rows * k, 0.02f, rng);
    for (uint64_t j = 0; j < std::min<uint64_t>(k, 16); ++j) w[j] = 0.f;           // an all-zero block
    for (uint64_t j = 0; j < std::min<uint64_t>(k, 16); ++j) w[k + j] = -1e-6f;     // negatives that round to zero
    w[2 * k] = 1e-41f;                                                           // subnormal
    w[3 * k + k / 2] = -3.f;                                                     // an outlier
    for (uint64_t j = 0; j < k; ++j) w[4 * k + j] = float(j % 7) * 0.5f;           // ties
    float amax = 0.f;
    for (float x : w) amax = std::max(amax, std::fabs(x));
    for (float t : {nvfp4_tensor_scale(amax), nvfp4_tensor_scale(2.f * amax)}) {  // its own, and a fused sibling's larger one
      const Encoded want = encode_oracle(w, rows, k, t);
      std::vector<uint8_t> codes(rows * nvfp4_row_bytes(k)), scales(rows * nvfp4_row_scales(k));
      std::vector<float> back(rows * k);
      nvfp4_encode_rows(w.data(), rows, k, t, codes.data(), scales.data(), back.data());
      ASSERT_EQ(codes, want.codes) << "k " << k;
      ASSERT_EQ(scales, want.scales) << "k " << k;
      // the decoded values written beside the codes are what the decoder gives back
      std::vector<float> dec(rows * k);
      nvfp4_decode_rows(codes.data(), scales.data(), t, rows, k, {}, dec.data());
      for (size_t i = 0; i < dec.size(); ++i) ASSERT_EQ(f32_bits(dec[i]), f32_bits(back[i])) << i;
    }
  }
}

TEST(Nvfp4, TensorScaleIsAmaxOver2688AndOneForZero) {
  EXPECT_EQ(f32_bits(nvfp4_tensor_scale(2688.f)), f32_bits(1.f));
  EXPECT_EQ(f32_bits(nvfp4_tensor_scale(0.3f)), f32_bits(0.3f / 2688.0f));
  EXPECT_EQ(f32_bits(nvfp4_tensor_scale(0.f)), f32_bits(1.f));  // ModelOpt's would be 0, and every scale NaN
}

// Each tool's dequantization, written out: ModelOpt e2m1_values[code] * (float(s) * t);
// compressed-tensors (sign ? -1 : 1) * e2m1[mag] * (float(s) / t).
float decode_oracle(uint8_t code, uint8_t s, float t, bool ct) {
  static const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float v = ct ? mag[code & 7] * ((code & 8) ? -1.f : 1.f) : ((code & 8) ? -mag[code & 7] : mag[code & 7]) + 0.f;
  const float e = e4m3_to_f32(s);
  const float block = ct ? e / t : e * t;
  const float out = v * block;
  return out != out ? f32_from_bits(kCanonicalNanBits) : out;
}

TEST(Nvfp4, DecodeIsEachToolsOnEveryCodeAndScale) {
  std::mt19937 rng(test::seed());
  IRIS_SEED_TRACE();
  std::uniform_real_distribution<float> u(1e-6f, 10.f);
  const float ts[] = {1.f, u(rng), u(rng), 1e-30f, 1e30f, 0.f, -0.5f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()};
  for (bool ct : {false, true})
    for (float t : ts)
      for (int s = 0; s < 256; ++s) {
        // one row of 16: codes 0..15 under scale byte s
        uint8_t codes[8];
        for (int j = 0; j < 8; ++j) codes[j] = uint8_t((2 * j) | ((2 * j + 1) << 4));
        const uint8_t sb = uint8_t(s);
        float out[16];
        nvfp4_decode_rows(codes, &sb, t, 1, 16, {ct, ct}, out);
        for (int c = 0; c < 16; ++c)
          ASSERT_EQ(f32_bits(out[c]), f32_bits(decode_oracle(uint8_t(c), sb, t, ct))) << "code " << c << " scale " << s << " t " << t << " ct " << ct;
      }
}

TEST(Nvfp4, CodeEightIsPlusZeroForModelOptAndMinusZeroForCompressedTensors) {
  const uint8_t codes[8] = {0x08, 0, 0, 0, 0, 0, 0, 0}, sb = 0x38;  // element 0: code 8; scale 1.0
  float out[16];
  nvfp4_decode_rows(codes, &sb, 1.f, 1, 16, {false, false}, out);
  EXPECT_EQ(f32_bits(out[0]), 0u);
  nvfp4_decode_rows(codes, &sb, 1.f, 1, 16, {true, true}, out);
  EXPECT_EQ(f32_bits(out[0]), 0x80000000u);
}

}  // namespace
}  // namespace iris::quant
