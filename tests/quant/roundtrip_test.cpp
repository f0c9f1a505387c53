// Randomized checks of every codec: the parallel versions equal the scalar references bit
// for bit, encode -> decode stays within each format's error bound, and awkward inputs
// (K off the block, one row, empty, extremes, NaN/Inf) behave as documented. Fresh seed
// every run, printed on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/float_bits.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "quant/tables.h"

namespace iris::quant {
namespace {

uint32_t seed() {
  static const uint32_t s = std::random_device{}();
  return s;
}

std::vector<float> random_values(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  for (size_t i = 0; i < n; i += 97) v[i] *= 20.f;  // outliers, as real weights have
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(Mxfp4Codec, FastEqualsReferenceAndErrorIsWithinHalfAStep) {
  std::mt19937 rng(seed());
  for (auto [rows, k] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}, {1, 31}, {3, 33}, {7, 64}, {16, 100}, {64, 4096}}) {
    for (auto rule : {Mxfp4ScaleRule::kOcpFloor, Mxfp4ScaleRule::kSearch}) {
      auto x = random_values(rows * k, 0.02f, rng);
      const uint64_t blocks = (k + 31) / 32;
      std::vector<uint8_t> c1(rows * blocks * 16), s1(rows * blocks), c2(c1.size()), s2(s1.size());
      mxfp4_encode_ref(x.data(), rows, k, rule, c1.data(), s1.data());
      mxfp4_encode(x.data(), rows, k, rule, c2.data(), s2.data());
      ASSERT_EQ(c1, c2) << "seed " << seed();
      ASSERT_EQ(s1, s2) << "seed " << seed();
      std::vector<float> y1(rows * k), y2(rows * k);
      mxfp4_decode_ref(c1.data(), s1.data(), rows, k, y1.data());
      mxfp4_decode(c1.data(), s1.data(), rows, k, y2.data());
      ASSERT_TRUE(same_bits(y1, y2));
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t i = 0; i < k; ++i) {
          const float scale = e8m0_to_f32(s1[r * blocks + i / 32]);
          const float v = x[r * k + i], got = y1[r * k + i];
          // Inside the grid the error is at most half a step (1 * scale at the top); beyond
          // 6 * scale it saturates (OCP floor rule: values up to 8 * scale).
          const float bound = std::fabs(v) > 6 * scale ? std::fabs(v) - 6 * scale + 1e-30f : scale * (std::fabs(v) >= 4 * scale ? 1.f : 0.5f);
          ASSERT_LE(std::fabs(v - got), bound * 1.0001f) << "row " << r << " col " << i << " seed " << seed();
        }
    }
  }
}

TEST(Mxfp4Codec, SearchNeverDoesWorseThanTheFloorRule) {
  std::mt19937 rng(seed());
  auto x = random_values(32 * 256, 1.f, rng);
  auto err = [&](Mxfp4ScaleRule rule) {
    std::vector<uint8_t> c(256 * 16), s(256);
    std::vector<float> y(x.size());
    mxfp4_encode(x.data(), 256, 32, rule, c.data(), s.data());
    mxfp4_decode(c.data(), s.data(), 256, 32, y.data());
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += double(x[i] - y[i]) * (x[i] - y[i]);
    return e;
  };
  EXPECT_LE(err(Mxfp4ScaleRule::kSearch), err(Mxfp4ScaleRule::kOcpFloor));
}

TEST(Mxfp4Codec, EveryCodeRoundTripsAndSpecialBlocksAreDocumented) {
  for (int c = 0; c < 16; ++c) {
    const uint8_t want = c == 8 ? 0 : uint8_t(c);  // -0 encodes as +0
    EXPECT_EQ(e2m1_encode(e2m1_to_f32(uint8_t(c))), want) << c;
  }
  EXPECT_EQ(e2m1_encode(0.25f), 0);   // ties to the even mantissa
  EXPECT_EQ(e2m1_encode(0.75f), 2);
  EXPECT_EQ(e2m1_encode(5.0f), 6);
  EXPECT_EQ(e2m1_encode(100.f), 7);   // saturates at 6
  std::vector<float> zeros(32, 0.f), nan(32, 1.f), tiny(32, 1e-40f), huge(32, 3e38f);
  nan[3] = std::nanf("");
  uint8_t c[16], s;
  mxfp4_encode_ref(zeros.data(), 1, 32, Mxfp4ScaleRule::kOcpFloor, c, &s);
  EXPECT_EQ(s, 0);
  mxfp4_encode_ref(nan.data(), 1, 32, Mxfp4ScaleRule::kOcpFloor, c, &s);
  EXPECT_EQ(s, 0xff);
  mxfp4_encode_ref(tiny.data(), 1, 32, Mxfp4ScaleRule::kOcpFloor, c, &s);
  EXPECT_EQ(s, 0);  // clamped at 2^-127
  mxfp4_encode_ref(huge.data(), 1, 32, Mxfp4ScaleRule::kOcpFloor, c, &s);
  float y[32];
  mxfp4_decode_ref(c, &s, 1, 32, y);
  EXPECT_NEAR(y[0] / 3e38f, 1.0, 0.25);
  mxfp4_encode_ref(nullptr, 0, 32, Mxfp4ScaleRule::kOcpFloor, c, &s);  // empty: nothing touched
}

TEST(Nf4Codec, FastEqualsReferenceForAnyElementCount) {
  std::mt19937 rng(seed());
  for (uint64_t n : {1ull, 2ull, 63ull, 64ull, 65ull, 255ull, 16383ull, 16385ull, 100000ull}) {
    auto x = random_values(n, 0.02f, rng);
    Nf4DoubleQuant a, b;
    nf4_encode_dq_ref(x.data(), n, &a);
    nf4_encode_dq(x.data(), n, &b);
    ASSERT_EQ(a.codes, b.codes) << n << " seed " << seed();
    ASSERT_EQ(a.absmax_codes, b.absmax_codes) << n;
    ASSERT_EQ(a.nested_absmax, b.nested_absmax) << n;
    ASSERT_EQ(f32_bits(a.offset), f32_bits(b.offset)) << n;
    // The passes used for streaming give the same bytes as the one-shot encoder.
    std::vector<float> absmax((n + 63) / 64);
    nf4_block_absmax(x.data(), 0, n, n, absmax.data());
    Nf4DoubleQuant c;
    nf4_quantize_absmax(absmax.data(), absmax.size(), &c);
    c.codes.assign((n + 1) / 2, 0);
    nf4_encode_codes(x.data(), 0, n, n, absmax.data(), c.codes.data());
    ASSERT_EQ(c.codes, a.codes);
    ASSERT_EQ(c.absmax_codes, a.absmax_codes);
    // Decoding: every element within half an NF4 gap of its block's absmax.
    std::vector<float> table(16), map(256), y1(n), y2(n);
    for (int i = 0; i < 16; ++i) table[i] = nf4_to_f32(uint8_t(i));
    for (int i = 0; i < 256; ++i) map[i] = dynamic_map_value(uint8_t(i));
    Bnb4bitParams p;
    p.code_table = table.data();
    p.double_quant = true;
    p.absmax_codes = a.absmax_codes.data();
    p.nested_absmax = a.nested_absmax.data();
    p.nested_map = map.data();
    p.nested_offset = a.offset;
    bnb4_decode_ref(a.codes.data(), 0, n, p, y1.data());
    bnb4_decode(a.codes.data(), n, p, y2.data());
    ASSERT_TRUE(same_bits(y1, y2));
    for (uint64_t i = 0; i < n; ++i) {
      const float am = absmax[i / 64], dq = bnb_block_absmax(p, i / 64);
      // Largest NF4 gap is 0.30 of absmax (between -1 and -0.696); plus the absmax's own error.
      ASSERT_LE(std::fabs(x[i] - y1[i]), 0.16f * am + std::fabs(am - dq) + 1e-7f) << i << " n " << n << " seed " << seed();
    }
  }
}

TEST(Nf4Codec, DecisionTreeTiesGoToTheLowerCodeAndNanToCodeZero) {
  EXPECT_EQ(nf4_encode(0.03979014977812767f), 7);  // exactly on the midpoint 7|8
  EXPECT_EQ(nf4_encode(std::nextafter(0.03979014977812767f, 1.f)), 8);
  EXPECT_EQ(nf4_encode(std::nanf("")), 0);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(nf4_encode(nf4_to_f32(uint8_t(c))), c) << c;
  for (int c = 0; c < 256; ++c) EXPECT_EQ(dynamic_map_encode(dynamic_map_value(uint8_t(c))), c) << c;
}

TEST(Fp8Codec, EveryByteRoundTripsAndRoundingIsNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(e4m3_encode(e4m3_to_f32(uint8_t(b))), b == 0x80 ? 0x80 : b) << b;
  }
  EXPECT_EQ(e4m3_encode(std::ldexp(1.f, -10)), 0x00);        // tie between 0 and 2^-9: even
  EXPECT_EQ(e4m3_encode(1.5f * std::ldexp(1.f, -10)), 0x01);  // above the tie
  EXPECT_EQ(e4m3_encode(464.f), 0x7e);                       // saturates, never NaN
  EXPECT_EQ(e4m3_encode(-1e30f), 0xfe);
  EXPECT_EQ(e4m3_encode(std::nanf("")), 0x7f);
  EXPECT_EQ(e4m3_encode(1.0625f), e4m3_encode(1.0f));        // tie 1.0|1.125 -> even (1.0)
  EXPECT_EQ(e4m3_encode(1.1875f), e4m3_encode(1.25f));       // tie 1.125|1.25 -> even (1.25)
}

TEST(Fp8Codec, FastEqualsReferenceAndZeroUnitsGiveScaleOne) {
  std::mt19937 rng(seed());
  for (auto g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock})
    for (auto [b, n, k] : std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>{{1, 1, 1}, {1, 3, 40}, {2, 130, 200}, {1, 256, 512}}) {
      auto x = random_values(b * n * k, 0.05f, rng);
      const uint64_t ns = fp8_scale_count(b, n, k, g, 128, 128);
      std::vector<uint8_t> c1(x.size()), c2(x.size());
      std::vector<float> s1(ns), s2(ns);
      fp8_encode_ref(x.data(), b, n, k, g, 128, 128, c1.data(), s1.data());
      fp8_encode(x.data(), b, n, k, g, 128, 128, c2.data(), s2.data());
      ASSERT_EQ(c1, c2) << "seed " << seed();
      ASSERT_TRUE(same_bits(s1, s2));
      Fp8Scales s;
      s.granularity = g;
      s.data = s1.data();
      std::vector<float> y1(x.size()), y2(x.size());
      fp8_decode_ref(c1.data(), b, n, k, s, y1.data());
      fp8_decode(c1.data(), b, n, k, s, y2.data());
      ASSERT_TRUE(same_bits(y1, y2));
      for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(x[i] - y1[i]), std::fabs(x[i]) * 0.0625f + 0.002f * s1[0] * 448) << i;
    }
  std::vector<float> zeros(128 * 128, 0.f);
  std::vector<uint8_t> c(zeros.size());
  float scale;
  fp8_encode_ref(zeros.data(), 1, 128, 128, Fp8Granularity::kBlock, 128, 128, c.data(), &scale);
  EXPECT_EQ(scale, 1.f);
  EXPECT_EQ(c[0], 0);
}

}  // namespace
}  // namespace iris::quant
