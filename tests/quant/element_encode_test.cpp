// The fast element encoders (quant/element_encode.h) against their oracles over a sweep of
// the whole FP32 range, every tie point and its neighbours, and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/float_bits.h"
#include "quant/element_encode.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/tables.h"

namespace iris::quant {
namespace {

// Calls f on: every stride-th FP32 bit pattern (both signs, NaN and Inf included), the
// special values, and each `points` value with its 4 neighbours on either side.
template <typename F>
void sweep(uint32_t stride, const std::vector<float>& points, F f) {
  for (uint64_t b = 0; b < (1ull << 32); b += stride) f(f32_from_bits(uint32_t(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.f, -0.f, inf, -inf, std::nanf(""), -std::nanf(""), 1e-45f, -1e-45f, 1e-38f, 3e38f, -3e38f}) f(v);
  for (float p : points)
    for (float s : {1.f, -1.f}) {
      float lo = s * p, hi = s * p;
      f(lo);
      for (int i = 0; i < 4; ++i) {
        lo = std::nextafter(lo, -inf);
        hi = std::nextafter(hi, inf);
        f(lo);
        f(hi);
      }
    }
}

// The grid values of a table and the midpoints between neighbours.
std::vector<float> grid_and_midpoints(const std::vector<float>& grid) {
  std::vector<float> out = grid;
  for (size_t i = 0; i + 1 < grid.size(); ++i) out.push_back(float((double(grid[i]) + double(grid[i + 1])) / 2));
  return out;
}

TEST(ElementEncode, E2m1FastEqualsTheOracleEverywhere) {
  std::vector<float> grid;
  for (int c = 0; c < 8; ++c) grid.push_back(e2m1_to_f32(uint8_t(c)));
  grid.push_back(7.f);  // between 6 and the saturation
  int64_t checked = 0;
  sweep(997, grid_and_midpoints(grid), [&](float y) {
    ASSERT_EQ(e2m1_encode(y), e2m1_encode_ref(y)) << "y = " << y << " (bits 0x" << std::hex << f32_bits(y) << ")";
    ++checked;
  });
  EXPECT_GT(checked, 4000000);
}

TEST(ElementEncode, E2m1TiesGoToTheEvenMantissaAndItSaturates) {
  EXPECT_EQ(e2m1_encode_ref(0.25f), 0);  // 0 | 0.5
  EXPECT_EQ(e2m1_encode_ref(0.75f), 2);  // 0.5 | 1
  EXPECT_EQ(e2m1_encode_ref(1.25f), 2);  // 1 | 1.5
  EXPECT_EQ(e2m1_encode_ref(1.75f), 4);  // 1.5 | 2
  EXPECT_EQ(e2m1_encode_ref(2.5f), 4);   // 2 | 3
  EXPECT_EQ(e2m1_encode_ref(3.5f), 6);   // 3 | 4
  EXPECT_EQ(e2m1_encode_ref(5.0f), 6);   // 4 | 6
  EXPECT_EQ(e2m1_encode_ref(-5.0f), 14);
  EXPECT_EQ(e2m1_encode_ref(7.99f), 7);
  EXPECT_EQ(e2m1_encode_ref(-1e30f), 15);
  EXPECT_EQ(e2m1_encode_ref(-0.1f), 0);  // rounds to zero: +0, never the -0 code
  EXPECT_EQ(e2m1_encode_ref(std::nanf("")), 0);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(e2m1_encode(e2m1_to_f32(uint8_t(c))), c == 8 ? 0 : c) << c;
}

// The positive E4M3 grid, values beyond 448 (the saturation), and the midpoints between.
std::vector<float> e4m3_points() {
  std::vector<float> grid;
  for (int c = 0; c <= 0x7e; ++c) grid.push_back(e4m3_to_f32(uint8_t(c)));
  for (float v : {464.f, 480.f, 1e4f}) grid.push_back(v);
  return grid_and_midpoints(grid);
}

TEST(ElementEncode, E4m3FastEqualsTheOracleEverywhere) {
  int64_t checked = 0;
  sweep(10007, e4m3_points(), [&](float x) {
    ASSERT_EQ(e4m3_encode(x), e4m3_encode_ref(x)) << "x = " << x << " (bits 0x" << std::hex << f32_bits(x) << ")";
    ++checked;
  });
  EXPECT_GT(checked, 400000);
}

TEST(ElementEncode, E4m3RoundIsTheValueOfTheEncodedCodeEverywhere) {
  int64_t checked = 0;
  sweep(10007, e4m3_points(), [&](float x) {
    ASSERT_EQ(f32_bits(e4m3_round(x)), f32_bits(e4m3_to_f32(e4m3_encode(x)))) << "x = " << x << " (bits 0x" << std::hex << f32_bits(x) << ")";
    ++checked;
  });
  EXPECT_GT(checked, 400000);
}

TEST(ElementEncode, E4m3RoundsToNearestEvenAndSaturates) {
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) {
      EXPECT_EQ(e4m3_encode_ref(e4m3_to_f32(uint8_t(b))), b) << b;
    }
  EXPECT_EQ(e4m3_encode_ref(std::ldexp(1.f, -10)), 0x00);        // tie 0 | 2^-9 -> 0
  EXPECT_EQ(e4m3_encode_ref(3 * std::ldexp(1.f, -10)), 0x02);    // tie 2^-9 | 2^-8 -> 2^-8
  EXPECT_EQ(e4m3_encode_ref(1.0625f), 0x38);                     // tie 1 | 1.125 -> 1
  EXPECT_EQ(e4m3_encode_ref(1.1875f), 0x3a);                     // tie 1.125 | 1.25 -> 1.25
  EXPECT_EQ(e4m3_encode_ref(464.f), 0x7e);                       // tie 448 | (NaN slot) -> 448
  EXPECT_EQ(e4m3_encode_ref(1e30f), 0x7e);                       // saturates
  EXPECT_EQ(e4m3_encode_ref(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(e4m3_encode_ref(std::nanf("")), 0x7f);
  EXPECT_EQ(e4m3_encode_ref(-0.f), 0x80);
}

TEST(ElementEncode, Nf4FastEqualsTheDecisionTreeEverywhere) {
  std::vector<float> points;
  for (int i = 0; i < 15; ++i) points.push_back(nf4_threshold(i));
  int64_t checked = 0;
  sweep(997, points, [&](float x) {
    ASSERT_EQ(nf4_encode_fast(x), nf4_encode(x)) << "x = " << x;
    ++checked;
  });
  EXPECT_GT(checked, 4000000);
}

TEST(ElementEncode, Nf4MidpointsTakeTheLowerCodeAndNanCodeZero) {
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(nf4_encode(nf4_threshold(i)), i) << i;
    EXPECT_EQ(nf4_encode(std::nextafter(nf4_threshold(i), 2.f)), i + 1) << i;
  }
  for (int c = 0; c < 16; ++c) EXPECT_EQ(nf4_encode(nf4_to_f32(uint8_t(c))), c) << c;
  EXPECT_EQ(nf4_encode(std::nanf("")), 0);
  EXPECT_EQ(nf4_encode(2.f), 15);
  EXPECT_EQ(nf4_encode(-2.f), 0);
}

TEST(ElementEncode, DynamicMapFastEqualsBitsandbytesSearchEverywhere) {
  std::vector<float> grid;
  for (int c = 0; c < 256; ++c) grid.push_back(dynamic_map_value(uint8_t(c)));
  std::vector<float> points = grid_and_midpoints(grid);
  for (int c = 0; c + 1 < 256; ++c)  // bnb's own FP32 midpoints
    points.push_back((dynamic_map_value(uint8_t(c)) + dynamic_map_value(uint8_t(c + 1))) * 0.5f);
  float map[256];
  for (int c = 0; c < 256; ++c) map[c] = dynamic_map_value(uint8_t(c));
  int64_t checked = 0;
  sweep(997, points, [&](float x) {
    ASSERT_EQ(dynamic_map_encode_fast(x, map), dynamic_map_encode(x)) << "x = " << x << " (bits 0x" << std::hex << f32_bits(x) << ")";
    ++checked;
  });
  EXPECT_GT(checked, 4000000);
}

TEST(ElementEncode, DynamicMapCodesItsOwnEntriesAndOtherwiseTheNearestOfTwo) {
  for (int c = 0; c < 256; ++c) EXPECT_EQ(dynamic_map_encode(dynamic_map_value(uint8_t(c))), c) << c;
  // Between entries: one of the two neighbours; the nearer one except within the FP32
  // rounding of the midpoint (bnb computes it as (a + b) * 0.5f).
  for (int c = 0; c + 1 < 256; ++c) {
    const float lo = dynamic_map_value(uint8_t(c)), hi = dynamic_map_value(uint8_t(c + 1));
    for (int s = 1; s < 16; ++s) {
      const float x = lo + (hi - lo) * float(s) / 16.f;
      const uint8_t q = dynamic_map_encode(x);
      const double dq = std::fabs(double(dynamic_map_value(q)) - x);
      const double best = std::min(std::fabs(double(lo) - x), std::fabs(double(hi) - x));
      EXPECT_TRUE(q == c || q == c + 1) << "x = " << x << " between entries " << c << " and " << c + 1 << ", got " << int(q);
      const double mid = (double(lo) + double(hi)) / 2, ulp = std::fabs(double(std::nextafter(x, 2.f)) - x);
      if (std::fabs(x - mid) > 2 * ulp) {
        EXPECT_EQ(dq, best) << "x = " << x;
      }
    }
  }
}

}  // namespace
}  // namespace iris::quant
