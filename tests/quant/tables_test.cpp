// quant/tables.h against the format definitions (OCP MX v1.0, FORMATS.md 4.1) and against
// the code books bitsandbytes stored in the llama-nf4-dq fixture.
#include <gtest/gtest.h>

#include <cmath>

#include "common/float_bits.h"
#include "quant/tables.h"
#include "tests/quant/st_reader.h"

namespace iris::quant {
namespace {

TEST(Tables, E2m1EveryCodeIsTheOcpValue) {
  const float ocp[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};  // OCP MX v1.0, E2M1 table
  for (int c = 0; c < 16; ++c) {
    const float want = (c & 8) ? -ocp[c & 7] : ocp[c & 7];
    EXPECT_EQ(f32_bits(e2m1_to_f32(uint8_t(c))), f32_bits(want)) << "code " << c;
  }
  EXPECT_EQ(f32_bits(e2m1_to_f32(8)), 0x80000000u);  // -0
}

TEST(Tables, E8m0EveryByteIsAPowerOfTwoAnd0xFFIsNan) {
  for (int e = 0; e < 255; ++e) {
    const float want = float(std::ldexp(1.0, e - 127));  // exact, 2^-127 is an FP32 subnormal
    EXPECT_EQ(f32_bits(e8m0_to_f32(uint8_t(e))), f32_bits(want)) << "byte " << e;
  }
  EXPECT_EQ(f32_bits(e8m0_to_f32(0)), 0x00400000u);
  EXPECT_EQ(f32_bits(e8m0_to_f32(0xff)), kCanonicalNanBits);
}

TEST(Tables, E4m3EveryByteFollowsTheDefinition) {
  for (int b = 0; b < 256; ++b) {
    const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    const float v = e4m3_to_f32(uint8_t(b));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(v)) << b;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
    EXPECT_EQ(f32_bits(v), f32_bits(float(s ? -mag : mag))) << "byte " << b;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.f, -6));
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.f, -9));
}

// Every NF4 weight of the fixture stores the same two code books; both must equal ours.
TEST(Tables, Nf4TableAndDynamicMapEqualTheFixtureTensors) {
  test::StFile f(test::kFixtures + "llama-nf4-dq/model.safetensors");
  int checked = 0;
  for (const auto& [name, t] : f.tensors()) {
    const bool nested = name.ends_with(".nested_quant_map"), nf4 = name.ends_with(".quant_map") && !nested;
    if (!nested && !nf4) continue;
    ASSERT_EQ(t.dtype, "F32");
    const auto v = t.as<float>();
    ASSERT_EQ(v.size(), nested ? 256u : 16u) << name;
    for (size_t i = 0; i < v.size(); ++i) {
      const float ours = nested ? dynamic_map_value(uint8_t(i)) : nf4_to_f32(uint8_t(i));
      EXPECT_EQ(f32_bits(ours), f32_bits(v[i])) << name << " index " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 28);  // 14 weights x 2 tables
}

TEST(Tables, DynamicMapIsSortedWithZeroAt127AndOneAt255) {
  for (int i = 1; i < 256; ++i) EXPECT_LT(dynamic_map_value(uint8_t(i - 1)), dynamic_map_value(uint8_t(i))) << i;
  EXPECT_EQ(dynamic_map_value(127), 0.f);
  EXPECT_EQ(dynamic_map_value(255), 1.f);
  EXPECT_GT(dynamic_map_value(0), -1.f);  // no -1.0: the map is asymmetric
}

TEST(Tables, Nf4ThresholdsLieBetweenAdjacentCodesNearTheMidpoint) {
  for (int i = 0; i < 15; ++i) {
    const float lo = nf4_to_f32(uint8_t(i)), hi = nf4_to_f32(uint8_t(i + 1)), t = nf4_threshold(i);
    EXPECT_LT(lo, t) << i;
    EXPECT_LT(t, hi) << i;
    EXPECT_NEAR(t, (double(lo) + double(hi)) / 2, 1e-7) << i;
  }
}

TEST(Tables, BnbFp4IsItsIntegerTableOverTwelve) {
  // bitsandbytes get_4bit_type("fp4"): this list, divided in FP32 by its max |.| (12).
  const float bnb[8] = {0.f, 0.0625f, 8.f, 12.f, 4.f, 6.f, 2.f, 3.f};
  for (int c = 0; c < 16; ++c) {
    const float mag = bnb[c & 7] / 12.0f;
    EXPECT_EQ(f32_bits(bnb_fp4_to_f32(uint8_t(c))), f32_bits((c & 8) ? -mag : mag)) << c;
  }
  // And the decimal literals of bnb's CUDA dequantizer (dDequantizeFP4Tree).
  EXPECT_EQ(bnb_fp4_to_f32(1), 5.208333333e-03f);
  EXPECT_EQ(bnb_fp4_to_f32(2), 0.66666667f);
  EXPECT_EQ(bnb_fp4_to_f32(4), 0.33333333f);
  EXPECT_EQ(bnb_fp4_to_f32(6), 0.16666667f);
}

}  // namespace
}  // namespace iris::quant
