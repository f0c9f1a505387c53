// bitsandbytes NF4: decoding by definition (with and without double quant, any range),
// fast == oracle for any element count on fresh random input, the streaming passes, error
// bounds, zero blocks, NaN/Inf and extreme magnitudes.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "common/float_bits.h"
#include "quant/element_encode.h"
#include "quant/nf4.h"
#include "quant/tables.h"
#include "tests/quant/test_util.h"

namespace iris::quant {
namespace {

using test::first_difference;

Bnb4bitParams dq_params(const Nf4DoubleQuant& q) {
  Bnb4bitParams p;  // code table and nested map left null: the NF4 / dynamic-map defaults
  p.double_quant = true;
  p.absmax_codes = q.absmax_codes.data();
  p.nested_absmax = q.nested_absmax.data();
  p.nested_offset = q.offset;
  return p;
}

void expect_same(const Nf4DoubleQuant& a, const Nf4DoubleQuant& b, const std::string& what) {
  EXPECT_EQ(first_difference(a.codes, b.codes), -1) << what << ": codes";
  EXPECT_EQ(first_difference(a.absmax_codes, b.absmax_codes), -1) << what << ": absmax codes";
  EXPECT_EQ(first_difference(a.nested_absmax, b.nested_absmax), -1) << what << ": nested absmax";
  EXPECT_EQ(f32_bits(a.offset), f32_bits(b.offset)) << what << ": offset";
}

TEST(Nf4, DecodingFollowsTheDefinitionWithAndWithoutDoubleQuant) {
  // Element i holds code i (all 16), 4 blocks of 4 (block_size 4).
  const std::vector<uint8_t> codes = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  const float absmax[4] = {1.f, 0.5f, 3.f, 0.0123f};
  Bnb4bitParams p;
  p.block_size = 4;
  p.absmax = absmax;
  std::vector<float> y(16), y2(16);
  bnb4_decode_ref(codes.data(), 0, 16, p, y.data());
  bnb4_decode(codes.data(), 16, p, y2.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(f32_bits(y[i]), f32_bits(nf4_to_f32(uint8_t(i)) * absmax[i / 4])) << i;
  EXPECT_EQ(first_difference(y, y2), -1);
  // Double quant: absmax = map[q] * nested[b / 2] then + offset, each rounded; any code table.
  const uint8_t qabs[4] = {200, 17, 255, 0};
  const float nested[2] = {0.0371f, 1.7f};
  float fp4[16];
  for (int c = 0; c < 16; ++c) fp4[c] = bnb_fp4_to_f32(uint8_t(c));
  Bnb4bitParams d;
  d.block_size = 4;
  d.code_table = fp4;
  d.double_quant = true;
  d.absmax_codes = qabs;
  d.nested_absmax = nested;
  d.nested_block_size = 2;
  d.nested_offset = 0.0123f;
  bnb4_decode_ref(codes.data(), 0, 16, d, y.data());
  bnb4_decode(codes.data(), 16, d, y2.data());
  for (int i = 0; i < 16; ++i) {
    volatile float scaled = dynamic_map_value(qabs[i / 4]) * nested[i / 8];
    const float am = scaled + 0.0123f;
    EXPECT_EQ(f32_bits(y[i]), f32_bits(fp4[i] * am)) << i;
  }
  EXPECT_EQ(first_difference(y, y2), -1);
  // Any sub-range (odd starts and ends, odd lengths), an odd total n, and BF16 output.
  for (uint64_t i0 = 0; i0 < 16; ++i0)
    for (uint64_t i1 = i0; i1 <= 16; ++i1) {
      std::vector<float> r(i1 - i0);
      bnb4_decode_range(codes.data(), i0, i1, d, r.data());
      for (uint64_t i = i0; i < i1; ++i) ASSERT_EQ(f32_bits(r[i - i0]), f32_bits(y[i])) << i0 << ".." << i1;
    }
  std::vector<float> odd(15);
  bnb4_decode(codes.data(), 15, d, odd.data());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(f32_bits(odd[i]), f32_bits(y[i])) << i;
  std::vector<uint16_t> y16(16);
  bnb4_decode_bf16(codes.data(), 16, d, y16.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y16[i], f32_to_bf16(y[i]));
}

TEST(Nf4, FastEqualsReferenceForAnyElementCount) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  for (uint64_t n : {0ull, 1ull, 2ull, 3ull, 63ull, 64ull, 65ull, 127ull, 255ull, 16383ull, 16384ull, 16385ull, 16447ull, 100001ull}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto x = test::random_weights(n, 0.02f, rng);
    Nf4DoubleQuant a, b, c;
    nf4_encode_dq_ref(x.data(), n, &a);
    ASSERT_EQ(a.codes.size(), (n + 1) / 2);
    ASSERT_EQ(a.absmax_codes.size(), (n + 63) / 64);
    ASSERT_EQ(a.nested_absmax.size(), ((n + 63) / 64 + 255) / 256);
    nf4_encode_dq(x.data(), n, &b);
    expect_same(a, b, "nf4_encode_dq");
    // BF16 input: the same bytes as the FP32 oracle on the widened values.
    const auto x16 = test::to_bf16(x);
    const auto xw = test::from_bf16(x16);
    Nf4DoubleQuant aw;
    nf4_encode_dq_ref(xw.data(), n, &aw);
    nf4_encode_dq_bf16(x16.data(), n, &c);
    expect_same(aw, c, "nf4_encode_dq_bf16");
    // The streaming passes, in chunks of 3 blocks, give the same bytes.
    std::vector<float> absmax((n + 63) / 64);
    for (uint64_t i0 = 0; i0 < n; i0 += 192) nf4_block_absmax(x.data() + i0, i0, std::min<uint64_t>(192, n - i0), n, absmax.data());
    Nf4DoubleQuant s;
    nf4_quantize_absmax(absmax.data(), absmax.size(), &s);
    s.codes.assign((n + 1) / 2, 0);
    for (uint64_t i0 = 0; i0 < n; i0 += 192)
      nf4_encode_codes(x.data() + i0, i0, std::min<uint64_t>(192, n - i0), n, absmax.data(), s.codes.data() + i0 / 2);
    expect_same(a, s, "streaming passes");
    // Absmax and codes in one pass per chunk: the same absmax and bytes.
    std::vector<float> absmax1(absmax.size(), -1.f);
    s.codes.assign((n + 1) / 2, 0);
    for (uint64_t i0 = 0; i0 < n; i0 += 192)
      nf4_encode_first_level(x.data() + i0, i0, std::min<uint64_t>(192, n - i0), n, absmax1.data(), s.codes.data() + i0 / 2);
    ASSERT_EQ(first_difference(absmax, absmax1), -1);
    expect_same(a, s, "one-pass first level");
    // Decoders agree; every element within half the widest NF4 gap of its block absmax,
    // plus the error of the double-quantized absmax itself.
    const Bnb4bitParams p = dq_params(a);
    std::vector<float> y(n), y2(n);
    bnb4_decode_ref(a.codes.data(), 0, n, p, y.data());
    bnb4_decode(a.codes.data(), n, p, y2.data());
    ASSERT_EQ(first_difference(y, y2), -1);
    for (uint64_t i = 0; i < n; ++i) {
      const float am = absmax[i / 64], dq = bnb_block_absmax(p, i / 64);
      ASSERT_LE(std::fabs(x[i] - y[i]), 0.16f * am + std::fabs(am - dq)) << "element " << i;
    }
  }
}

TEST(Nf4, OddCountPadsTheLastLowNibbleWithTheCodeOfZero) {
  const std::vector<float> x = {0.5f, -1.f, 0.25f};
  Nf4DoubleQuant q;
  nf4_encode_dq_ref(x.data(), 3, &q);
  ASSERT_EQ(q.codes.size(), 2u);
  EXPECT_EQ(q.codes[0], (nf4_encode(0.5f) << 4) | 0);  // -1 is code 0
  EXPECT_EQ(q.codes[1], (nf4_encode(0.25f) << 4) | 7);  // the padding 0 is code 7
}

TEST(Nf4, ZeroBlocksEncodeAsCodeZeroAndDecodeToZero) {
  std::vector<float> x(200, 0.f);
  x[150] = 1.f;  // blocks 0 and 1 all zero, block 2 not, block 3 short and zero
  Nf4DoubleQuant a, b;
  nf4_encode_dq_ref(x.data(), x.size(), &a);
  nf4_encode_dq(x.data(), x.size(), &b);
  expect_same(a, b, "zeros");
  for (int j = 0; j < 64; ++j) EXPECT_EQ(a.codes[j], 0) << j;  // 0 * (1/0) = NaN -> code 0 (bnb)
  std::vector<float> y(200);
  bnb4_decode_ref(a.codes.data(), 0, 200, dq_params(a), y.data());
  for (int i = 0; i < 200; ++i) EXPECT_NEAR(y[i], x[i], 1e-2f) << i;
}

// The second level's codes (the process's vector path: ctest runs this suite on each) at
// every dynamic-map entry, every midpoint between neighbours and one ulp either side of both
// (where a search's comparisons tip), against bitsandbytes' own dynamic_map_encode. Each group
// of 256 opens with 1.0, so its nested absmax is 1 and, with offset 0, the encoder sees the
// values themselves.
TEST(Nf4, NestedCodesAtEveryMapEntryAndMidpointEqualBitsandbytes) {
  std::vector<float> points;
  for (int i = 0; i < 256; ++i) {
    const float m = dynamic_map_value(uint8_t(i));
    std::vector<float> here = {m};
    if (i < 255) here.push_back((m + dynamic_map_value(uint8_t(i + 1))) * 0.5f);
    for (float p : here)
      for (float q : {p, std::nextafter(p, 2.f), std::nextafter(p, -2.f)})
        if (std::fabs(q) <= 1.f) points.push_back(q);
  }
  std::vector<float> absmax;
  for (size_t i = 0; i < points.size(); ++i) {
    if (absmax.size() % 256 == 0) absmax.push_back(1.f);
    absmax.push_back(points[i]);
  }
  const uint64_t nabs = absmax.size(), groups = (nabs + 255) / 256;
  std::vector<uint8_t> codes(nabs);
  std::vector<float> nested(groups);
  nf4_quantize_absmax_groups(absmax.data(), 0, groups, nabs, 0.f, codes.data(), nested.data());
  for (uint64_t g = 0; g < groups; ++g) ASSERT_EQ(nested[g], 1.f) << g;
  for (uint64_t a = 0; a < nabs; ++a)
    ASSERT_EQ(int(codes[a]), int(dynamic_map_encode(absmax[a]))) << "value " << absmax[a] << " (bits 0x" << std::hex << f32_bits(absmax[a]) << ")";
}

TEST(Nf4, NanInfAndExtremeMagnitudesDoNotCrashAndMatchTheOracle) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(64 * 6 + 10, 0.5f);
  x[3] = std::nanf("");
  x[64 + 7] = -inf;
  for (int i = 0; i < 64; ++i) {
    x[128 + i] = (i % 2 ? -1 : 1) * 1e-38f * float(i + 1);
    x[192 + i] = (i % 2 ? -1 : 1) * 3e38f * (float(i + 1) / 64.f);
    x[256 + i] = std::nanf("");  // a block of NaN: absmax -FLT_MAX, as bnb's fmaxf gives
  }
  for (int i = 320; i < 384; ++i) x[i] = i == 321 ? 3.4e38f : 1e-30f;
  Nf4DoubleQuant a, b;
  nf4_encode_dq_ref(x.data(), x.size(), &a);
  nf4_encode_dq(x.data(), x.size(), &b);
  expect_same(a, b, "specials");
  EXPECT_EQ(a.codes[1] & 15, 0);  // element 3 (NaN), the low nibble of byte 1: code 0
  for (int j = 128; j < 160; ++j) EXPECT_EQ(a.codes[j], 0) << j;
  {
    // A block of NaN among finite ones (no infinity to swamp the nested offset, the mean of
    // the absmax, which its -FLT_MAX then moves), whole and as the short last block.
    std::vector<float> m(64 * 3 + 20, 0.25f);
    for (int i = 64; i < 128; ++i) m[i] = std::nanf("");
    for (size_t i = 192; i < m.size(); ++i) m[i] = std::nanf("");
    m[5] = -0.75f;
    Nf4DoubleQuant ma, mb;
    nf4_encode_dq_ref(m.data(), m.size(), &ma);
    nf4_encode_dq(m.data(), m.size(), &mb);
    expect_same(ma, mb, "a block of NaN");
  }
  // Without the Inf, the magnitudes alone decode within the NF4 bound (absmax FP32 direct).
  x[64 + 7] = 0.5f;
  for (int i = 256; i < 320; ++i) x[i] = 0.5f;
  x[3] = 0.5f;
  std::vector<float> absmax((x.size() + 63) / 64);
  nf4_block_absmax(x.data(), 0, x.size(), x.size(), absmax.data());
  std::vector<uint8_t> codes((x.size() + 1) / 2);
  nf4_encode_codes(x.data(), 0, x.size(), x.size(), absmax.data(), codes.data());
  Bnb4bitParams p;
  p.absmax = absmax.data();
  std::vector<float> y(x.size());
  bnb4_decode(codes.data(), x.size(), p, y.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(double(x[i]) - y[i]), 0.16 * absmax[i / 64]) << i;
}


// Values exactly on a threshold (bitsandbytes compares with a strict '>') and one ulp either
// side, in whole 64-value blocks (the vectorised path) whose absmax is 1, so that the scaled
// values are the thresholds themselves: the fast encoder against the oracle, and the code of
// threshold i is i (it exceeds thresholds 0 .. i-1 only).
TEST(Nf4, ValuesOnTheThresholdsTakeTheLowerCode) {
  std::vector<float> x(64 * 2, 0.f);
  for (int i = 0; i < 15; ++i) {
    const float t = nf4_threshold(i);
    x[1 + i] = t;
    x[16 + i] = std::nextafter(t, 2.f);
    x[31 + i] = std::nextafter(t, -2.f);
    x[64 + 1 + i] = t;
  }
  x[0] = 1.f;
  x[64] = -1.f;  // the second block's absmax, from a negative value
  Nf4DoubleQuant a, b;
  nf4_encode_dq_ref(x.data(), x.size(), &a);
  nf4_encode_dq(x.data(), x.size(), &b);
  expect_same(a, b, "thresholds");
  auto code = [&](const Nf4DoubleQuant& q, int i) { return i % 2 ? q.codes[i / 2] & 15 : q.codes[i / 2] >> 4; };
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(code(b, 1 + i), i) << "on threshold " << i;
    EXPECT_EQ(code(b, 16 + i), i + 1) << "just above threshold " << i;
    EXPECT_EQ(code(b, 31 + i), i) << "just below threshold " << i;
    EXPECT_EQ(code(b, 64 + 1 + i), i) << "on threshold " << i << ", second block";
  }
}

}  // namespace
}  // namespace iris::quant
