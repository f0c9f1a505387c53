// The int_group format (FORMAT.md 4.5) as the reader sees it: the components its parameters
// imply, the parameters it refuses, and the reference decode of a small tensor whose every
// value is worked out here by hand from the section's rule (not by the decoder under test),
// with a permutation, zero points, 3-bit codes straddling bytes, and a permutation that is not
// one refused before any value is placed; and LLM.int8's post factor.
#include <gtest/gtest.h>

#include <cstring>

#include "common/float_bits.h"
#include "formats/tensor_decode.h"
#include "formats/tensor_desc.h"

namespace iris {
namespace {

TensorDesc desc(std::vector<uint64_t> shape, nlohmann::json params) {
  TensorDesc d;
  d.name = "w";
  d.shape = std::move(shape);
  d.dtype = DType::kF16;
  d.format = Format::kIntGroup;
  d.params = std::move(params);
  d.layout = choose_layout(d, 16, 256);
  return d;
}

nlohmann::json params(int bits, uint64_t group, const char* scale_dtype, bool zeros, bool act_order) {
  return {{"bits", bits}, {"group_size", group}, {"scale_dtype", scale_dtype}, {"zero_points", zeros}, {"act_order", act_order}};
}

TEST(IntGroup, ComponentsFollowTheParameters) {
  // [2 experts, 48 rows, 100 columns], 3 bits, groups of 32 (4 groups, the last of 4 columns).
  auto specs = component_specs(desc({2, 48, 100}, params(3, 32, "bf16", true, true))).value();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].role, Role::kCodes);
  EXPECT_EQ(specs[0].shape, (std::vector<uint64_t>{2, 48, 128 * 3 / 8}));  // tiled: rows of padded_k codes
  EXPECT_EQ(specs[1].role, Role::kScales);
  EXPECT_EQ(specs[1].dtype, DType::kBF16);
  EXPECT_EQ(specs[1].shape, (std::vector<uint64_t>{2, 48, 4}));
  EXPECT_EQ(specs[2].role, Role::kZeroPoints);
  EXPECT_EQ(specs[2].shape, (std::vector<uint64_t>{2, 48, 4}));
  EXPECT_EQ(specs[3].role, Role::kPermutation);
  EXPECT_EQ(specs[3].dtype, DType::kU32);
  EXPECT_EQ(specs[3].shape, (std::vector<uint64_t>{2, 100}));
  auto plain = component_specs(desc({64, 256}, params(4, 128, "f16", false, false))).value();
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[1].shape, (std::vector<uint64_t>{64, 2}));
}

TEST(IntGroup, ParametersOutsideTheFormatAreRefused) {
  for (auto p : {params(5, 32, "f16", true, false), params(4, 0, "f16", true, false), params(4, 32, "u8", true, false),
                 params(4, 32, "f8_e4m3", false, false)}) {
    auto r = component_specs(desc({64, 256}, p));
    EXPECT_FALSE(r.is_ok()) << p.dump();
  }
  auto extra = params(4, 32, "f16", true, false);
  extra["nibble_order"] = "low_first";
  EXPECT_FALSE(component_specs(desc({64, 256}, extra)).is_ok());
  auto missing = params(4, 32, "f16", true, false);
  missing.erase("act_order");
  EXPECT_FALSE(component_specs(desc({64, 256}, missing)).is_ok());
}

// One row of K = 16 at 3 bits, groups of 8, F16 scales 0.5 and -2, zero points 3 and 5, the
// permutation reversing each half. The codes are 0..7 then 7..0 in stored order.
struct SmallTensor {
  TensorDesc d = desc({1, 16}, params(3, 8, "f16", true, true));
  std::vector<uint8_t> codes, scales, zeros, perm;
  ComponentBytes bytes{};
  SmallTensor() {
    auto specs = component_specs(d).value();
    codes.assign(specs[0].bytes, 0);
    // One row, tile_n 1: the tile holds the row at its start, then padding codes 0.
    const uint8_t stored[16] = {0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 3, 2, 1, 0};
    for (int j = 0; j < 16; ++j) {
      const int bit = 3 * j;
      codes[bit / 8] |= uint8_t(stored[j] << (bit % 8));
      if (bit % 8 > 5) codes[bit / 8 + 1] |= uint8_t(stored[j] >> (8 - bit % 8));
    }
    scales.resize(4);
    const uint16_t s0 = f32_to_f16(0.5f), s1 = f32_to_f16(-2.0f);
    std::memcpy(&scales[0], &s0, 2);
    std::memcpy(&scales[2], &s1, 2);
    zeros = {3, 5};
    perm.resize(64);
    for (uint32_t j = 0; j < 16; ++j) {
      const uint32_t col = j < 8 ? 7 - j : 23 - j;
      std::memcpy(&perm[4 * j], &col, 4);
    }
    bytes[int(Role::kCodes)] = codes;
    bytes[int(Role::kScales)] = scales;
    bytes[int(Role::kZeroPoints)] = zeros;
    bytes[int(Role::kPermutation)] = perm;
  }
};

TEST(IntGroup, ReferenceDecodeFollowsTheSectionsRule) {
  SmallTensor t;
  std::vector<float> out(16);
  ASSERT_TRUE(reference_decode(t.d, t.bytes, out.data()).is_ok());
  // Stored column j (code c) lands at logical column perm[j] with (c - zero) * scale.
  // j = 0..7: codes 0..7, zero 3, scale 0.5, logical column 7 - j.
  // j = 8..15: codes 7..0, zero 5, scale -2, logical column 23 - j.
  const float want[16] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -1.5f,  // columns 0..7 from j = 7..0
                          10.0f, 8.0f, 6.0f, 4.0f, 2.0f, 0.0f, -2.0f, -4.0f};  // columns 8..15 from j = 15..8
  for (int c = 0; c < 16; ++c) EXPECT_EQ(out[c], want[c]) << "column " << c;
}

TEST(IntGroup, APermutationThatIsNotOneIsRefused) {
  SmallTensor t;
  const uint32_t again = 7;  // place 1 names place 0's column
  std::memcpy(&t.perm[4], &again, 4);
  std::vector<float> out(16);
  auto s = reference_decode(t.d, t.bytes, out.data());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("permutation"), std::string::npos) << s.message();
  const uint32_t past = 16;  // a column past K
  std::memcpy(&t.perm[4], &past, 4);
  EXPECT_FALSE(reference_decode(t.d, t.bytes, out.data()).is_ok());
}

// bitsandbytes LLM.int8 (2.6): 8-bit codes offset by 128, one F32 scale a row, and the post
// factor, bitsandbytes' FP32 1/127, applied after the scale. Scale 0x3f1d0503 and q = 74 were
// chosen (by a search in numpy's float32) where the order matters: (q * s) * c is 0x3eb6fbc2,
// while q * (s * c) and (q * s) / 127 both give 0x3eb6fbc3.
TEST(IntGroup, PostFactorMultipliesAfterTheScale) {
  auto p = params(8, 4, "f32", false, false);
  p["post_factor"] = double(7.874015718698502e-3f);
  TensorDesc d = desc({1, 4}, p);
  d.dtype = DType::kF32;
  auto specs = component_specs(d).value();
  std::vector<uint8_t> codes(specs[0].bytes, 0), scales(4);
  const uint8_t stored[4] = {128 + 74, 128 - 74, 128, 0};  // q = 74, -74, 0, -128
  std::memcpy(codes.data(), stored, 4);
  const uint32_t scale_bits = 0x3f1d0503u;
  std::memcpy(scales.data(), &scale_bits, 4);
  ComponentBytes bytes{};
  bytes[int(Role::kCodes)] = codes;
  bytes[int(Role::kScales)] = scales;
  std::vector<float> out(4);
  ASSERT_TRUE(reference_decode(d, bytes, out.data()).is_ok());
  uint32_t got[4];
  std::memcpy(got, out.data(), 16);
  EXPECT_EQ(got[0], 0x3eb6fbc2u);
  EXPECT_EQ(got[1], 0xbeb6fbc2u);
  EXPECT_EQ(got[2], 0u);
  // q = -128: (-128 * s) is exact (a power of two), times c once.
  float s;
  std::memcpy(&s, &scale_bits, 4);
  volatile float c = 7.874015718698502e-3f, prod = -128.0f * s;
  EXPECT_EQ(out[3], prod * c);
}

TEST(IntGroup, PostFactorMustBeAFiniteNonzeroFp32Value) {
  for (double f : {0.0, 0.1, -0.0, 1e300}) {
    auto p = params(8, 256, "f32", false, false);
    p["post_factor"] = f;
    EXPECT_FALSE(component_specs(desc({64, 256}, p)).is_ok()) << f;
  }
  auto p = params(8, 256, "f32", false, false);
  p["post_factor"] = "1/127";
  EXPECT_FALSE(component_specs(desc({64, 256}, p)).is_ok());
  p["post_factor"] = 0.5;
  EXPECT_TRUE(component_specs(desc({64, 256}, p)).is_ok());
}

}  // namespace
}  // namespace iris
