// FP8 E4M3: fast == oracle for every granularity on fresh random input (FP32 and BF16
// input), encode -> decode error bounds, decoding with F32/BF16/F16 scales, the single
// rounding behind the BF16-scale rule, zero units, NaN/Inf and extreme magnitudes.
#include <gtest/gtest.h>

#include <cstdio>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <tuple>

#include "common/float_bits.h"
#include "quant/error_sums.h"
#include "quant/fp8.h"
#include "quant/tables.h"
#include "tests/quant/test_util.h"

namespace iris::quant {
namespace {

using test::first_difference;

const char* name(Fp8Granularity g) {
  return g == Fp8Granularity::kTensor ? "tensor" : g == Fp8Granularity::kChannel ? "channel" : g == Fp8Granularity::kBlock ? "block" : "group";
}

struct Encoded {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

Encoded encode(bool fast, const std::vector<float>& x, uint64_t b, uint64_t n, uint64_t k, Fp8Granularity g, uint64_t bn = 128,
               uint64_t bk = 128) {
  Encoded e{std::vector<uint8_t>(b * n * k), std::vector<float>(fp8_scale_count(b, n, k, g, bn, bk))};
  (fast ? fp8_encode : fp8_encode_ref)(x.data(), b, n, k, g, bn, bk, e.codes.data(), e.scales.data());
  return e;
}

Fp8Scales f32_scales(const Encoded& e, Fp8Granularity g, uint64_t bn = 128, uint64_t bk = 128) {
  Fp8Scales s;
  s.granularity = g;
  s.data = e.scales.data();
  s.block_n = bn;
  s.block_k = bk;
  return s;
}

TEST(Fp8, FastEqualsReferenceAndErrorIsWithinHalfAnUlp) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  using Shape = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>;  // batch, n, k, block_n, block_k
  for (auto g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock})
    for (auto [b, n, k, bn, bk] : std::vector<Shape>{{1, 1, 1, 128, 128}, {1, 3, 40, 128, 128}, {2, 130, 200, 128, 128},
                                                    {1, 256, 512, 128, 128}, {3, 17, 33, 8, 16}, {1, 1, 1000, 128, 128}}) {
      SCOPED_TRACE(std::string(name(g)) + " batch " + std::to_string(b) + " n " + std::to_string(n) + " k " + std::to_string(k));
      const auto x = test::random_weights(b * n * k, 0.05f, rng);
      const Encoded r = encode(false, x, b, n, k, g, bn, bk), f = encode(true, x, b, n, k, g, bn, bk);
      ASSERT_EQ(first_difference(r.codes, f.codes), -1);
      ASSERT_EQ(first_difference(r.scales, f.scales), -1);
      // BF16 input: the same bytes as the oracle on the widened values.
      const auto x16 = test::to_bf16(x);
      const Encoded rw = encode(false, test::from_bf16(x16), b, n, k, g, bn, bk);
      Encoded h{std::vector<uint8_t>(x.size()), std::vector<float>(r.scales.size())};
      fp8_encode_bf16(x16.data(), b, n, k, g, bn, bk, h.codes.data(), h.scales.data());
      ASSERT_EQ(first_difference(rw.codes, h.codes), -1);
      ASSERT_EQ(first_difference(rw.scales, h.scales), -1);
      // Decoders agree (FP32, and BF16 = FP32 rounded once).
      const Fp8Scales s = f32_scales(r, g, bn, bk);
      std::vector<float> y(x.size()), y2(x.size());
      std::vector<uint16_t> y16(x.size());
      fp8_decode_ref(r.codes.data(), b, n, k, s, y.data());
      fp8_decode(r.codes.data(), b, n, k, s, y2.data());
      fp8_decode_bf16(r.codes.data(), b, n, k, s, y16.data());
      ASSERT_EQ(first_difference(y, y2), -1);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y16[i], f32_to_bf16(y[i])) << i;
      // Error: half an E4M3 ulp (2^-4 relative) in the normal range, 2^-10 scaled units below.
      for (uint64_t i = 0; i < x.size(); ++i) {
        const uint64_t bb = i / (n * k), rr = i / k % n, cc = i % k;
        const double scale = fp8_scale_at(s, n, k, bb, rr, cc);
        ASSERT_LE(std::fabs(double(x[i]) - y[i]), (std::fabs(double(x[i])) * 0x1p-4 + 0x1p-10 * scale) * (1 + 1e-6)) << "element " << i;
      }
    }
}

// Every one of the 256 codes (NaN 0x7F / 0xFF, both zeros, subnormals, 448) under scales of
// every kind (1, a non-power of two, ones that take products to subnormal or Inf, a BF16-range
// tiny one, NaN): the fast decoder against the oracle, bit for bit, and a few values known by
// definition.
TEST(Fp8, EveryCodeUnderEveryKindOfScaleDecodesLikeTheOracle) {
  std::vector<uint8_t> codes(256 * 3);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i * 7 % 256 + i / 256);  // every code, in scattered order
  for (float scale : {1.0f, 0.4375f, 3.7f, 1e-40f, 1e-30f, 3e38f, std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(scale);
    Fp8Scales s;
    s.granularity = Fp8Granularity::kTensor;
    s.data = &scale;
    std::vector<float> want(codes.size()), got(codes.size());
    fp8_decode_ref(codes.data(), 1, 3, 256, s, want.data());
    fp8_decode(codes.data(), 1, 3, 256, s, got.data());
    ASSERT_EQ(first_difference(want, got), -1);
  }
  const float one = 1.0f;
  Fp8Scales s;
  s.data = &one;
  const std::vector<uint8_t> known = {0x00, 0x80, 0x01, 0x7e, 0xfe, 0x38, 0x7f, 0xff};
  std::vector<float> v(known.size());
  fp8_decode(known.data(), 1, 1, known.size(), s, v.data());
  EXPECT_EQ(f32_bits(v[0]), 0x00000000u);
  EXPECT_EQ(f32_bits(v[1]), 0x80000000u);  // -0
  EXPECT_EQ(v[2], 0x1p-9f);                // the smallest subnormal
  EXPECT_EQ(v[3], 448.0f);
  EXPECT_EQ(v[4], -448.0f);
  EXPECT_EQ(v[5], 1.0f);
  EXPECT_EQ(f32_bits(v[6]), kCanonicalNanBits);
  EXPECT_EQ(f32_bits(v[7]), kCanonicalNanBits);
}

// The fused encoder's decoded values are what the reference decoder gives back for its codes
// and scales, bit for bit, with its codes and scales fp8_encode's: every encoder granularity,
// awkward shapes and block sizes, values of every magnitude (subnormal results, saturation,
// zeros of both signs), all-zero units, and NaN / Inf inputs.
TEST(Fp8, EncodeDecodedGivesTheDecodersValues) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  std::uniform_int_distribution<int> expo(-149, 127), pick(0, 15);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  using Shape = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>;  // batch, n, k, block_n, block_k
  for (auto g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock})
    for (auto [b, n, k, bn, bk] : std::vector<Shape>{{1, 1, 1, 128, 128}, {1, 3, 40, 128, 128}, {2, 130, 200, 128, 128},
                                                    {3, 17, 33, 8, 16}, {1, 64, 1000, 128, 128}}) {
      SCOPED_TRACE(std::string(name(g)) + " batch " + std::to_string(b) + " n " + std::to_string(n) + " k " + std::to_string(k));
      std::vector<float> x = test::random_weights(b * n * k, 0.05f, rng);
      for (uint64_t i = 0; i < x.size(); ++i) {
        switch (pick(rng)) {
          case 0: x[i] = std::ldexp(mant(rng), expo(rng)) * (rng() % 2 ? -1.f : 1.f); break;
          case 1: x[i] = rng() % 2 ? -0.0f : 0.0f; break;
          case 2: x[i] *= 1e-4f; break;  // subnormal E4M3 results beside larger values
          case 3: if (rng() % 64 == 0) x[i] = rng() % 2 ? std::nanf("") : std::numeric_limits<float>::infinity(); break;
          default: break;
        }
      }
      if (n > 8) std::fill(x.begin(), x.begin() + k * 8, 0.0f);  // all-zero rows (and units)
      const Encoded f = encode(true, x, b, n, k, g, bn, bk);
      Encoded d{std::vector<uint8_t>(x.size(), 0x55), std::vector<float>(f.scales.size(), -1.f)};
      std::vector<float> got(x.size() + 1, 12345.f);
      fp8_encode_decoded(x.data(), b, n, k, g, bn, bk, d.codes.data(), d.scales.data(), got.data());
      EXPECT_EQ(got.back(), 12345.f);  // only batch * n * k values written
      got.pop_back();
      ASSERT_EQ(first_difference(f.codes, d.codes), -1);
      ASSERT_EQ(first_difference(f.scales, d.scales), -1);
      std::vector<float> want(x.size());
      fp8_decode_ref(f.codes.data(), b, n, k, f32_scales(f, g, bn, bk), want.data());
      const int64_t at = first_difference(want, got);  // bit for bit: -0 against +0 and NaN payloads count
      ASSERT_EQ(at, -1) << "input " << x[at] << " decoded " << want[at] << " fused " << got[at];
      if (g == Fp8Granularity::kTensor && b == 1) {
        // One unit with its multiplier found by the caller (the requantizer's streamed form):
        // fp8_encode's codes and the reference decoder's values again.
        std::vector<uint8_t> codes(x.size(), 0x55);
        std::vector<float> unit(x.size(), 12345.f);
        float amax = 0;
        for (float v : x) amax = std::isnan(v) ? amax : std::max(amax, std::fabs(v));
        fp8_encode_unit(x.data(), x.size(), fp8_multiplier(amax), codes.data(), unit.data());
        ASSERT_EQ(first_difference(f.codes, codes), -1);
        ASSERT_EQ(first_difference(want, unit), -1);
      }
    }
}

// The one-pass encoder with error sums (what the converter runs) against the two passes it
// replaced: fp8_encode_decoded, then add_error_sums of the input against the decoded values
// (each checked against its oracle above and in error_sums_test). Codes, scales and the three
// sums must be the same bits, for FP32 and BF16 input, per channel and per block (128 x 128,
// and smaller or odd blocks), on shapes around the 256-element groups and 65536-element sum
// blocks, partial edge blocks, k not a multiple of 16 (the portable path; it is also called
// directly), values whose
// squares leave float's range or whose unit's multiplier is clamped, zero units, and NaN and
// Inf (counted).
TEST(Fp8, EncodeSumsEqualsEncodingThenSummingTheErrors) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  std::uniform_int_distribution<int> pick(0, 63);
  struct Case {
    uint64_t rows, k, bn, bk;
  };
  const std::vector<Case> cases{{1, 16, 128, 128},  {3, 40, 128, 128},   {128, 256, 128, 128}, {130, 272, 128, 128}, {256, 4096, 128, 128},
                                {128, 2880, 128, 128}, {64, 96, 32, 48},  {37, 64, 16, 16},     {50, 80, 8, 40},      {2, 7, 1, 7}};
  auto bits = [](double v) { return std::bit_cast<uint64_t>(v); };
  for (const Case& t : cases)
    for (Fp8Granularity g : {Fp8Granularity::kChannel, Fp8Granularity::kBlock})
      for (int kind = 0; kind < 3; ++kind) {  // plain weights; extreme magnitudes and zero runs; NaN and Inf among them
        SCOPED_TRACE(std::to_string(t.rows) + " x " + std::to_string(t.k) + " block " + std::to_string(t.bn) + "x" + std::to_string(t.bk) +
                     " " + name(g) + " kind " + std::to_string(kind));
        std::vector<float> x = test::random_weights(t.rows * t.k, 0.02f, rng);
        if (kind == 1)
          for (uint64_t r = 0; r < t.rows; ++r) {
            const int p = pick(rng);
            const float f = p < 8 ? 1e32f : p < 16 ? 1e-33f : p < 24 ? 1e-40f : p < 28 ? 0.f : 1.f;  // whole rows: whole units
            for (uint64_t c = 0; c < t.k; ++c) x[r * t.k + c] *= f;
          }
        uint64_t nonfinite_want = 0;
        if (kind == 2)
          for (auto& v : x)
            if (pick(rng) == 0) {
              v = rng() % 2 ? std::nanf("") : -std::numeric_limits<float>::infinity();
              ++nonfinite_want;
            }
        const std::vector<uint16_t> h = test::to_bf16(x);
        for (int input = 0; input < 4; ++input) {  // FP32; BF16; FP32 on the portable path; FP32 on the AVX2 path
          const std::vector<float> in = input == 1 ? test::from_bf16(h) : x;  // the BF16 input's exact values
          const uint64_t nscales = fp8_scale_count(1, t.rows, t.k, g, t.bn, t.bk);
          Encoded want{std::vector<uint8_t>(in.size(), 0x55), std::vector<float>(nscales, -1.f)};
          std::vector<float> back(in.size());
          fp8_encode_decoded(in.data(), 1, t.rows, t.k, g, t.bn, t.bk, want.codes.data(), want.scales.data(), back.data());
          ErrorSums want_sums{1.5, 2.5, 0.25};  // sums are added to what was there
          add_error_sums(in.data(), back.data(), in.size(), &want_sums);
          Encoded got{std::vector<uint8_t>(in.size(), 0xAA), std::vector<float>(nscales, -2.f)};
          ErrorSums sums{1.5, 2.5, 0.25};
          uint64_t nonfinite = 0;
          if (input == 3) {  // every path the CPU can run is tested on it, whatever the dispatch picks
            if (!detail::fp8_encode_sums_avx2(in.data(), t.rows, t.k, g, t.bn, t.bk, got.codes.data(), got.scales.data(), &sums, &nonfinite)) {
              std::printf("[ note ] this CPU has no AVX2: the AVX2 path is not run here\n");
              continue;
            }
          } else {
            nonfinite = input == 0   ? fp8_encode_sums(in.data(), t.rows, t.k, g, t.bn, t.bk, got.codes.data(), got.scales.data(), &sums)
                        : input == 1 ? fp8_encode_sums_bf16(h.data(), t.rows, t.k, g, t.bn, t.bk, got.codes.data(), got.scales.data(), &sums)
                                     : detail::fp8_encode_sums_portable(in.data(), t.rows, t.k, g, t.bn, t.bk, got.codes.data(), got.scales.data(), &sums);
          }
          SCOPED_TRACE(input == 0 ? "f32" : input == 1 ? "bf16" : input == 2 ? "f32, portable" : "f32, avx2");
          ASSERT_EQ(first_difference(want.codes, got.codes), -1);
          ASSERT_EQ(first_difference(want.scales, got.scales), -1);
          EXPECT_EQ(nonfinite, nonfinite_want);
          EXPECT_EQ(bits(sums.sum_sq_ref), bits(want_sums.sum_sq_ref)) << sums.sum_sq_ref << " vs " << want_sums.sum_sq_ref;
          EXPECT_EQ(bits(sums.sum_sq_err), bits(want_sums.sum_sq_err)) << sums.sum_sq_err << " vs " << want_sums.sum_sq_err;
          EXPECT_EQ(bits(sums.max_abs_err), bits(want_sums.max_abs_err)) << sums.max_abs_err << " vs " << want_sums.max_abs_err;
        }
      }
}

TEST(Fp8, DecodingEveryGranularityAndScaleTypeMatchesTheOracle) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  std::uniform_int_distribution<int> byte(0, 255);
  const uint64_t b = 2, n = 37, k = 300;
  std::vector<uint8_t> codes(b * n * k);
  for (auto& c : codes) c = uint8_t(byte(rng));  // NaN codes included
  std::vector<float> sf(b * n * k);              // more than enough scales for any granularity
  for (auto& v : sf) v = std::ldexp(1.f + float(byte(rng)) / 256.f, byte(rng) % 40 - 30);
  const auto s16 = test::to_bf16(sf);
  std::vector<uint16_t> sh(sf.size());
  for (size_t i = 0; i < sf.size(); ++i) sh[i] = f32_to_f16(sf[i]);
  for (auto g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock, Fp8Granularity::kGroup})
    for (auto type : {ScaleType::kF32, ScaleType::kBf16, ScaleType::kF16}) {
      SCOPED_TRACE(std::string(name(g)) + " scale type " + std::to_string(int(type)));
      Fp8Scales s;
      s.granularity = g;
      s.type = type;
      s.data = type == ScaleType::kF32 ? static_cast<const void*>(sf.data()) : type == ScaleType::kBf16 ? s16.data() : sh.data();
      s.block_n = 16;
      s.block_k = 64;
      s.group = 32;
      std::vector<float> y(codes.size()), y2(codes.size());
      std::vector<uint16_t> y16(codes.size());
      fp8_decode_ref(codes.data(), b, n, k, s, y.data());
      fp8_decode(codes.data(), b, n, k, s, y2.data());
      fp8_decode_bf16(codes.data(), b, n, k, s, y16.data());
      ASSERT_EQ(first_difference(y, y2), -1);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y16[i], f32_to_bf16(y[i])) << i;
        if ((codes[i] & 0x7f) == 0x7f) {
          ASSERT_EQ(f32_bits(y[i]), kCanonicalNanBits) << i;
        }
      }
    }
}

// compressed-tensors multiplies in BF16: bf16(float(bf16(q)) * float(scale)). Our BF16
// output rounds the FP32 product once; this holds because the FP32 product of an E4M3 value
// and a BF16 value is exact. Checked against a correct rounding of the exact (double)
// product, for every finite code and every BF16 scale whose product is a normal number.
uint16_t bf16_of_exact(double d) {  // round to nearest even, d normal in BF16's range
  int e;
  const double f = std::frexp(std::fabs(d), &e);  // |d| = f * 2^e, f in [0.5, 1)
  const double m = std::nearbyint(std::ldexp(f, 8));  // 8 significant bits, ties to even
  const float v = float(std::ldexp(m, e - 8));  // exact
  return uint16_t((f32_bits(v) >> 16) | (d < 0 ? 0x8000u : 0u));
}

TEST(Fp8, Bf16ScaledProductIsRoundedOnceLikeCompressedTensors) {
  int64_t checked = 0;
  for (int q = 1; q <= 0x7e; ++q)
    for (uint32_t sb = 0x0080; sb < 0x7f80; ++sb) {
      const float code = e4m3_to_f32(uint8_t(q)), scale = bf16_to_f32(uint16_t(sb));
      const double exact = double(code) * double(scale);
      if (exact < 0x1p-126 || exact >= 0x1p127) continue;
      ASSERT_EQ(f32_to_bf16(code * scale), bf16_of_exact(exact)) << "code " << q << " scale 0x" << std::hex << sb;
      ++checked;
    }
  EXPECT_GT(checked, 3000000);
}

TEST(Fp8, AllZeroUnitsGetScaleOneAndZeroCodes) {
  for (auto g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock}) {
    std::vector<float> x(130 * 140, 0.f);
    for (int c = 0; c < 140; ++c) x[129 * 140 + c] = -0.f;  // -0 codes keep the sign
    x[5] = 2.f;                                            // row 0, block (0, 0) not zero
    for (bool fast : {false, true}) {
      const Encoded e = encode(fast, x, 1, 130, 140, g);
      for (size_t u = 0; u < e.scales.size(); ++u) {
        const bool has_two = g == Fp8Granularity::kTensor || u == 0;
        EXPECT_EQ(e.scales[u], has_two ? 1.f / 224.f : 1.f) << name(g) << " unit " << u;
      }
      EXPECT_EQ(e.codes[5], 0x7e);
      EXPECT_EQ(e.codes[6], 0x00);
      EXPECT_EQ(e.codes[129 * 140], 0x80);
    }
  }
}

TEST(Fp8, NanInfAndExtremeMagnitudesAreHandledAsDocumented) {
  const float inf = std::numeric_limits<float>::infinity();
  // Rows: 0 NaN among ones, 1 +Inf among ones, 2 all 1e-38 and zeros, 3 tiny subnormals,
  // 4 huge values near FLT_MAX.
  const uint64_t n = 5, k = 64;
  std::vector<float> x(n * k, 1.f);
  x[3] = std::nanf("");
  x[k + 9] = inf;
  for (uint64_t c = 0; c < k; ++c) {
    x[2 * k + c] = c % 2 ? 1e-38f : 0.f;
    x[3 * k + c] = std::ldexp(float(c), -149);
    x[4 * k + c] = (c % 2 ? -1 : 1) * 3.4e38f * (float(c + 1) / 64.f);
  }
  for (bool fast : {false, true}) {
    const Encoded e = encode(fast, x, 1, n, k, Fp8Granularity::kChannel);
    EXPECT_EQ(e.codes[3], 0x7f);           // the NaN
    EXPECT_EQ(e.codes[4], 0x7e);           // its row is encoded normally: amax ignores NaN
    EXPECT_EQ(e.scales[0], 1.f / 448.f);
    EXPECT_EQ(e.codes[k + 9], 0x7f);       // Inf * (448 * (1/Inf)) = Inf * 0 = NaN
    EXPECT_EQ(e.codes[k + 10], 0x00);      // the rest of an Inf row: 0
    EXPECT_TRUE(std::isinf(e.scales[1]));
    const Fp8Scales s = f32_scales(e, Fp8Granularity::kChannel);
    std::vector<float> y(x.size());
    fp8_decode_ref(e.codes.data(), 1, n, k, s, y.data());
    for (uint64_t r = 2; r < n; ++r)
      for (uint64_t c = 0; c < k; ++c) {
        const uint64_t i = r * k + c;
        EXPECT_FALSE(std::isnan(y[i])) << "row " << r << " col " << c;  // no Inf * 0 even where 448/amax overflows
        EXPECT_LE(std::fabs(double(x[i]) - y[i]), std::fabs(double(x[i])) * 0x1p-4 + 0x1p-10 * e.scales[r] * 2 + 1e-45) << "row " << r << " col " << c;
      }
    EXPECT_EQ(e.scales[3], 1.f / FLT_MAX);  // mul clamped to FLT_MAX
  }
}

TEST(Fp8, MultiplierIsTorchsReciprocalTimes448WithTheDocumentedGuards) {
  EXPECT_EQ(fp8_multiplier(0.f), 1.f);
  for (float amax : {0.8125f, 1.f, 0.033f, 3e38f, 1e-30f}) {
    volatile float recip = 1.f / amax;  // two roundings, as torch
    EXPECT_EQ(f32_bits(fp8_multiplier(amax)), f32_bits(448.f * recip)) << amax;
  }
  EXPECT_EQ(fp8_multiplier(1e-37f), FLT_MAX);  // 448 / 1e-37 overflows
  EXPECT_EQ(fp8_multiplier(1e-45f), FLT_MAX);  // 1 / amax itself overflows
  EXPECT_EQ(fp8_multiplier(std::numeric_limits<float>::infinity()), 0.f);
}

TEST(Fp8, EmptyInputsTouchNothing) {
  uint8_t code = 0xAA;
  float scale = 7.f, out = 1.f;
  for (auto g : {Fp8Granularity::kChannel, Fp8Granularity::kBlock}) {
    fp8_encode(nullptr, 1, 0, 16, g, 128, 128, &code, &scale);
    fp8_encode_ref(nullptr, 1, 0, 16, g, 128, 128, &code, &scale);
    fp8_encode(nullptr, 0, 4, 16, g, 128, 128, &code, &scale);
  }
  fp8_decode(&code, 1, 0, 16, Fp8Scales{}, &out);
  fp8_decode(&code, 1, 3, 0, Fp8Scales{}, &out);
  EXPECT_EQ(code, 0xAA);
  EXPECT_EQ(scale, 7.f);
  EXPECT_EQ(out, 1.f);
  // A tensor scale is still written for an empty matrix: 1.
  fp8_encode(nullptr, 1, 0, 16, Fp8Granularity::kTensor, 128, 128, &code, &scale);
  EXPECT_EQ(scale, 1.f);
}

}  // namespace
}  // namespace iris::quant
