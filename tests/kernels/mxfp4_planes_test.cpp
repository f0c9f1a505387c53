// kernels/mxfp4_planes.h, the MXFP4 code words' order on the device, against an oracle of its
// own: the bit positions written out as a table here, and each code's value from the E2M1
// table. Runs without a GPU (the upload's kernel and the decoders use the same functions,
// and the GPU kernel cases check their outputs against the CPU reference on those words).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "common/float_bits.h"
#include "kernels/mxfp4_planes.h"
#include "quant/tables.h"

namespace iris {
namespace {

// kPlace[e][b]: the bit of the device word that holds bit b of element e's code (b 0..2 the
// magnitude, 3 the sign). Pair j (elements 2j, 2j + 1) must decode to BF16 bits 6..8 and 15
// (the low half) and 22..24 and 31 (the high half) after shifting left by 3j for j < 3.
constexpr int kPlace[8][4] = {
    {6, 7, 8, 15},     {22, 23, 24, 31},  // pair 0: in place
    {3, 4, 5, 12},     {19, 20, 21, 28},  // pair 1: 3 below
    {0, 1, 2, 9},      {16, 17, 18, 25},  // pair 2: 6 below
    {14, 10, 11, 13},  {30, 26, 27, 29},  // pair 3: the bits left
};

uint32_t oracle_to_planes(uint32_t w) {
  uint32_t p = 0;
  for (int e = 0; e < 8; ++e)
    for (int b = 0; b < 4; ++b) p |= ((w >> (4 * e + b)) & 1u) << kPlace[e][b];
  return p;
}

TEST(Mxfp4Planes, TheTableIsAPermutationOfTheWordsBits) {
  std::set<int> seen;
  for (const auto& e : kPlace)
    for (int b : e) seen.insert(b);
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 31);
}

TEST(Mxfp4Planes, EachBitGoesWhereTheTableSaysAndComesBack) {
  for (int i = 0; i < 32; ++i) {
    const uint32_t w = 1u << i;
    EXPECT_EQ(mxfp4_word_to_planes(w), oracle_to_planes(w)) << "bit " << i;
    EXPECT_EQ(mxfp4_planes_to_word(oracle_to_planes(w)), w) << "bit " << i;
  }
  std::mt19937 rng(std::random_device{}());
  for (uint32_t w : {0u, 0xFFFFFFFFu, 0x88888888u, 0x77777777u, 0x0F0F0F0Fu, 0xF0F0F0F0u}) {
    EXPECT_EQ(mxfp4_word_to_planes(w), oracle_to_planes(w)) << std::hex << w;
    EXPECT_EQ(mxfp4_planes_to_word(mxfp4_word_to_planes(w)), w) << std::hex << w;
  }
  for (int i = 0; i < 200000; ++i) {
    const uint32_t w = rng();
    ASSERT_EQ(mxfp4_word_to_planes(w), oracle_to_planes(w)) << std::hex << w;
    ASSERT_EQ(mxfp4_planes_to_word(mxfp4_word_to_planes(w)), w) << std::hex << w;
  }
}

// The decode the tensor-core kernels do (mxfp4_planes_pair, then the scale) gives, for every
// code at every place of a word with random neighbours, the BF16 bits of e2m1(code) * 2^-126:
// the value that the scale's factor 2^(e - 1) or 2^126 * 2^(e - 127) makes exact.
TEST(Mxfp4Planes, EveryCodeAtEveryPlaceDecodesToItsValue) {
  std::mt19937 rng(std::random_device{}());
  for (int e = 0; e < 8; ++e)
    for (uint32_t code = 0; code < 16; ++code)
      for (int trial = 0; trial < 50; ++trial) {
        const uint32_t w = (trial ? rng() & ~(0xFu << (4 * e)) : 0u) | (code << (4 * e));
        const uint32_t pair = mxfp4_planes_pair(mxfp4_word_to_planes(w), e / 2);
        const uint16_t got = uint16_t(e % 2 ? pair >> 16 : pair & 0xFFFFu);
        const float want = quant::e2m1_to_f32(uint8_t(code)) * std::ldexp(1.0f, -126);
        ASSERT_EQ(got, f32_to_bf16(want)) << "element " << e << " code " << code << " word " << std::hex << w;
        ASSERT_EQ(mxfp4_nibbles_pair(w, e / 2), pair) << "element " << e << " code " << code;
      }
}

}  // namespace
}  // namespace iris
