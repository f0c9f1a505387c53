// MXFP4: decoding by definition, fast == oracle on fresh random input, encode -> decode
// within half a grid step, awkward shapes, extreme magnitudes, NaN/Inf blocks, search rule.
#include <gtest/gtest.h>

#include <cstdio>

#include <bit>
#include <cmath>
#include <limits>

#include "common/float_bits.h"
#include "quant/error_sums.h"
#include "quant/mxfp4.h"
#include "quant/tables.h"
#include "tests/quant/test_util.h"

namespace iris::quant {
namespace {

using test::first_difference;

struct Encoded {
  std::vector<uint8_t> codes, scales;
};

Encoded encode_ref(const std::vector<float>& x, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule) {
  Encoded e{std::vector<uint8_t>(rows * mxfp4_row_bytes(k), 0xAA), std::vector<uint8_t>(rows * mxfp4_row_scales(k), 0xAA)};
  mxfp4_encode_ref(x.data(), rows, k, rule, e.codes.data(), e.scales.data());
  return e;
}

Encoded encode_fast(const std::vector<float>& x, uint64_t rows, uint64_t k, Mxfp4ScaleRule rule) {
  Encoded e{std::vector<uint8_t>(rows * mxfp4_row_bytes(k), 0x55), std::vector<uint8_t>(rows * mxfp4_row_scales(k), 0x55)};
  mxfp4_encode(x.data(), rows, k, rule, e.codes.data(), e.scales.data());
  return e;
}

std::vector<float> decode_ref(const Encoded& e, uint64_t rows, uint64_t k) {
  std::vector<float> y(rows * k);
  mxfp4_decode_ref(e.codes.data(), e.scales.data(), rows, k, y.data());
  return y;
}

TEST(Mxfp4, EveryCodeWithEveryScaleByteDecodesAsTheTablesSay) {
  // 256 rows (one per scale byte) x 32 elements: byte j holds codes j and 15 - j.
  std::vector<uint8_t> codes(256 * 16), scales(256);
  for (int r = 0; r < 256; ++r) {
    scales[r] = uint8_t(r);
    for (int j = 0; j < 16; ++j) codes[r * 16 + j] = uint8_t(j | (15 - j) << 4);
  }
  std::vector<float> y(256 * 32), y2(y.size());
  std::vector<uint16_t> y16(y.size());
  mxfp4_decode_ref(codes.data(), scales.data(), 256, 32, y.data());
  mxfp4_decode(codes.data(), scales.data(), 256, 32, y2.data());
  mxfp4_decode_bf16(codes.data(), scales.data(), 256, 32, y16.data());
  const float ocp[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (int r = 0; r < 256; ++r)
    for (int i = 0; i < 32; ++i) {
      const int c = i % 2 == 0 ? i / 2 : 15 - i / 2;
      const double v = ((c & 8) ? -1 : 1) * ocp[c & 7] * std::ldexp(1.0, r - 127);
      // Exact in FP32, except that 2 * 2^127 and above overflow to +-Inf.
      const float inf = std::numeric_limits<float>::infinity();
      const float want = std::fabs(v) > std::numeric_limits<float>::max() ? (v < 0 ? -inf : inf) : float(v);
      EXPECT_EQ(f32_bits(y[r * 32 + i]), r == 255 ? kCanonicalNanBits : f32_bits(want)) << "scale " << r << " code " << c;
      EXPECT_EQ(f32_bits(y2[r * 32 + i]), f32_bits(y[r * 32 + i]));
      EXPECT_EQ(y16[r * 32 + i], f32_to_bf16(y[r * 32 + i]));
    }
}

// Encode -> decode error of one element, given its block's scale byte: at most half a grid
// step inside the grid; beyond 6 * scale it saturates (the floor rule allows up to 8 * scale,
// so at most 2 * scale). Values below half the smallest step round to 0 (at most 0.25 * scale).
void expect_error_bound(float v, float got, uint8_t scale_byte, const std::string& where) {
  const double s = std::ldexp(1.0, scale_byte - 127), a = std::fabs(double(v)) / s;
  const double half_step = a < 2 ? 0.25 : a < 4 ? 0.5 : 1.0;
  const double bound = (a > 6 ? a - 6 : half_step) * s;
  ASSERT_LE(std::fabs(double(v) - double(got)), bound) << where << ": v = " << v << ", decoded " << got << ", scale 2^" << scale_byte - 127;
}

TEST(Mxfp4, FastEqualsReferenceAndErrorIsWithinHalfAStep) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  for (auto [rows, k] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}, {1, 31}, {1, 32}, {1, 33}, {3, 33}, {7, 64}, {16, 100}, {64, 2880}, {2, 5000}})
    for (auto rule : {Mxfp4ScaleRule::kOcpFloor, Mxfp4ScaleRule::kSearch}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + (rule == Mxfp4ScaleRule::kSearch ? " search" : " floor"));
      const auto x = test::random_weights(rows * k, 0.02f, rng);
      const Encoded a = encode_ref(x, rows, k, rule), b = encode_fast(x, rows, k, rule);
      ASSERT_EQ(first_difference(a.codes, b.codes), -1);
      ASSERT_EQ(first_difference(a.scales, b.scales), -1);
      // BF16 input: the same bytes as the FP32 encoders on the widened values.
      const auto x16 = test::to_bf16(x);
      const auto xw = test::from_bf16(x16);
      Encoded c{std::vector<uint8_t>(a.codes.size()), std::vector<uint8_t>(a.scales.size())};
      mxfp4_encode_bf16(x16.data(), rows, k, rule, c.codes.data(), c.scales.data());
      const Encoded cw = encode_ref(xw, rows, k, rule);
      ASSERT_EQ(first_difference(c.codes, cw.codes), -1);
      ASSERT_EQ(first_difference(c.scales, cw.scales), -1);
      // Decoders agree; only k values a row are written.
      const auto y = decode_ref(a, rows, k);
      std::vector<float> y2(rows * k + 1, 12345.f);
      mxfp4_decode(a.codes.data(), a.scales.data(), rows, k, y2.data());
      EXPECT_EQ(y2.back(), 12345.f);
      y2.pop_back();
      ASSERT_EQ(first_difference(y, y2), -1);
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t i = 0; i < k; ++i)
          expect_error_bound(x[r * k + i], y[r * k + i], a.scales[r * mxfp4_row_scales(k) + i / 32],
                             "row " + std::to_string(r) + " col " + std::to_string(i));
    }
}

TEST(Mxfp4, PaddingOfAPartialBlockIsZeroCodes) {
  const std::vector<float> x(33, 1.0f);  // one full block, then 1 value + 31 padding zeros
  const Encoded e = encode_ref(x, 1, 33, Mxfp4ScaleRule::kOcpFloor);
  ASSERT_EQ(e.codes.size(), 32u);
  EXPECT_EQ(e.scales[0], 125);  // amax 1 -> 2^(0 - 2)
  EXPECT_EQ(e.codes[16], 0x06);  // 1.0 / 0.25 = 4 is code 6; its padding partner is code 0
  for (int j = 17; j < 32; ++j) EXPECT_EQ(e.codes[j], 0) << j;
}

TEST(Mxfp4, EmptyInputsTouchNothing) {
  uint8_t codes = 0xAA, scales = 0xAA;
  float out = 1.f;
  mxfp4_encode_ref(nullptr, 0, 32, Mxfp4ScaleRule::kOcpFloor, &codes, &scales);
  mxfp4_encode(nullptr, 0, 32, Mxfp4ScaleRule::kSearch, &codes, &scales);
  mxfp4_encode(nullptr, 5, 0, Mxfp4ScaleRule::kOcpFloor, &codes, &scales);
  mxfp4_decode(&codes, &scales, 0, 32, &out);
  mxfp4_decode(&codes, &scales, 5, 0, &out);
  EXPECT_EQ(codes, 0xAA);
  EXPECT_EQ(scales, 0xAA);
  EXPECT_EQ(out, 1.f);
}

TEST(Mxfp4, ZeroBlocksNanBlocksAndExtremeMagnitudes) {
  const float inf = std::numeric_limits<float>::infinity();
  // Block 0 zeros, 1 with a NaN, 2 with -Inf, 3 tiny (1e-38, subnormal), 4 huge (3e38),
  // 5 subnormals below the clamp (2^-140), 6 mixed extremes.
  std::vector<float> x(7 * 32, 0.f);
  for (int i = 0; i < 32; ++i) {
    x[32 + i] = 1.f;
    x[64 + i] = 1.f;
    x[96 + i] = (i % 2 ? -1 : 1) * 1e-38f;
    x[128 + i] = (i % 2 ? -1 : 1) * 3e38f * (float(i + 1) / 32.f);
    x[160 + i] = std::ldexp(1.f, -140) * float(i);
    x[192 + i] = i == 0 ? 3.4e38f : 1e-30f;
  }
  x[32 + 5] = std::nanf("");
  x[64 + 9] = -inf;
  for (auto rule : {Mxfp4ScaleRule::kOcpFloor, Mxfp4ScaleRule::kSearch}) {
    const Encoded a = encode_ref(x, 7, 32, rule), b = encode_fast(x, 7, 32, rule);
    ASSERT_EQ(first_difference(a.codes, b.codes), -1);
    ASSERT_EQ(first_difference(a.scales, b.scales), -1);
    EXPECT_EQ(a.scales[0], 0);
    EXPECT_EQ(a.scales[1], 0xff);
    EXPECT_EQ(a.scales[2], 0xff);
    EXPECT_EQ(a.scales[5], 0);  // 2^-140 * 31 < 2^-125: the exponent clamps at -127
    for (int blk : {0, 1, 2})
      for (int j = 0; j < 16; ++j) EXPECT_EQ(a.codes[blk * 16 + j], 0) << blk;
    const auto y = decode_ref(a, 7, 32);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(f32_bits(y[i]), 0u);
      EXPECT_EQ(f32_bits(y[32 + i]), kCanonicalNanBits);
      EXPECT_EQ(f32_bits(y[64 + i]), kCanonicalNanBits);
      for (int blk : {3, 4, 5, 6}) expect_error_bound(x[blk * 32 + i], y[blk * 32 + i], a.scales[blk], "block " + std::to_string(blk));
    }
  }
}

// The fused encoder's decoded values are what the reference decoder gives back for its
// codes, bit for bit, on random weights of many magnitudes, values that round to zero (both
// signs), zeros of both signs, subnormals, the clamp at 2^-127, values near FLT_MAX, NaN and
// Inf blocks, partial last blocks; its codes and scales are mxfp4_encode's.
TEST(Mxfp4, EncodeDecodedGivesTheDecodersValues) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  std::uniform_int_distribution<int> expo(-149, 127), pick(0, 15);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  for (auto [rows, k] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}, {1, 31}, {3, 33}, {5, 100}, {16, 256}, {7, 1000}, {2, 2880}})
    for (auto rule : {Mxfp4ScaleRule::kOcpFloor, Mxfp4ScaleRule::kSearch}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + (rule == Mxfp4ScaleRule::kSearch ? " search" : " floor"));
      std::vector<float> x = test::random_weights(rows * k, 0.02f, rng);
      for (uint64_t i = 0; i < x.size(); ++i) {
        switch (pick(rng)) {  // about half the values replaced by awkward ones
          case 0: x[i] = std::ldexp(mant(rng), expo(rng)) * (rng() % 2 ? -1.f : 1.f); break;  // any magnitude
          case 1: x[i] = rng() % 2 ? -0.0f : 0.0f; break;
          case 2: x[i] = x[i] * 1e-3f; break;  // rounds to zero beside its block's larger values
          case 3: x[i] = std::ldexp(float(rng() % 8), -149); break;  // subnormal
          case 4: x[i] = 3.4e38f * (rng() % 2 ? -1.f : 1.f); break;
          case 5: if (rng() % 64 == 0) x[i] = rng() % 2 ? std::nanf("") : -std::numeric_limits<float>::infinity(); break;
          default: break;
        }
      }
      const Encoded a = encode_fast(x, rows, k, rule);
      Encoded b{std::vector<uint8_t>(a.codes.size(), 0x55), std::vector<uint8_t>(a.scales.size(), 0x55)};
      std::vector<float> got(rows * k + 1, 12345.f);
      mxfp4_encode_decoded(x.data(), rows, k, rule, b.codes.data(), b.scales.data(), got.data());
      EXPECT_EQ(got.back(), 12345.f);  // only rows * k values written
      got.pop_back();
      ASSERT_EQ(first_difference(a.codes, b.codes), -1);
      ASSERT_EQ(first_difference(a.scales, b.scales), -1);
      const auto want = decode_ref(a, rows, k);
      const int64_t d = first_difference(want, got);  // bit for bit: -0 against +0 and NaN payloads count
      ASSERT_EQ(d, -1) << "input " << x[d] << " decoded " << want[d] << " fused " << got[d];
    }
}

// The one-pass encoder with error sums (what the converter runs) against the two passes it
// replaced: mxfp4_encode_decoded, then add_error_sums of the input against the decoded values
// (each checked against its oracle above and in error_sums_test). Codes, scales and the three
// sums must be the same bits, for FP32 and BF16 input, both rules, its AVX-512 path (k a
// multiple of 32, where the CPU has it) and its portable one: shapes around the 256-element
// groups and 65536-element sum blocks, partial last blocks, values whose squares leave
// float's range (summed exactly), zeros, and NaN/Inf blocks (counted).
TEST(Mxfp4, EncodeSumsEqualsEncodingThenSummingTheErrors) {
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  std::uniform_int_distribution<int> pick(0, 63);
  const std::vector<std::pair<uint64_t, uint64_t>> shapes{{1, 1},   {1, 32},    {3, 40},   {1, 256}, {2, 288}, {9, 96},
                                                          {64, 1024}, {70, 1024}, {33, 2880}, {3, 4096}, {17, 4160}};
  auto bits = [](double v) { return std::bit_cast<uint64_t>(v); };
  for (auto [rows, k] : shapes)
    for (auto rule : {Mxfp4ScaleRule::kOcpFloor, Mxfp4ScaleRule::kSearch})
      for (int kind = 0; kind < 3; ++kind) {  // plain weights; extreme magnitudes; NaN and Inf among them
        SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + " kind " + std::to_string(kind) +
                     (rule == Mxfp4ScaleRule::kSearch ? " search" : " floor"));
        std::vector<float> x = test::random_weights(rows * k, 0.02f, rng);
        uint64_t nonfinite_blocks_want = 0;
        for (uint64_t i = 0; i < x.size(); ++i) {
          const int p = pick(rng);
          if (kind == 1 && p < 8) x[i] *= p < 3 ? 1e32f : p < 6 ? 1e-33f : 0.f;
          if (kind == 2 && p == 0) x[i] = rng() % 2 ? std::nanf("") : -std::numeric_limits<float>::infinity();
        }
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t b = 0; b < mxfp4_row_scales(k); ++b) {
            bool bad = false;
            for (uint64_t j = b * 32; j < std::min(k, b * 32 + 32); ++j) bad |= !std::isfinite(x[r * k + j]);
            nonfinite_blocks_want += bad;
          }
        const std::vector<uint16_t> h = test::to_bf16(x);
        for (int input = 0; input < 4; ++input) {  // FP32; BF16; FP32 on the portable path; FP32 on the AVX2 path
          const std::vector<float> in = input == 1 ? test::from_bf16(h) : x;  // the BF16 input's exact values
          Encoded want{std::vector<uint8_t>(rows * mxfp4_row_bytes(k), 0x55), std::vector<uint8_t>(rows * mxfp4_row_scales(k), 0x55)};
          std::vector<float> back(x.size());
          mxfp4_encode_decoded(in.data(), rows, k, rule, want.codes.data(), want.scales.data(), back.data());
          ErrorSums want_sums{1.5, 2.5, 0.25};  // sums are added to what was there
          add_error_sums(in.data(), back.data(), in.size(), &want_sums);
          Encoded got{std::vector<uint8_t>(want.codes.size(), 0xAA), std::vector<uint8_t>(want.scales.size(), 0xAA)};
          ErrorSums sums{1.5, 2.5, 0.25};
          uint64_t nonfinite = 0;
          if (input == 3) {  // every path the CPU can run is tested on it, whatever the dispatch picks
            if (!detail::mxfp4_encode_sums_avx2(in.data(), rows, k, rule, got.codes.data(), got.scales.data(), &sums, &nonfinite)) {
              std::printf("[ note ] this CPU has no AVX2: the AVX2 path is not run here\n");
              continue;
            }
          } else {
            nonfinite = input == 0   ? mxfp4_encode_sums(in.data(), rows, k, rule, got.codes.data(), got.scales.data(), &sums)
                        : input == 1 ? mxfp4_encode_sums_bf16(h.data(), rows, k, rule, got.codes.data(), got.scales.data(), &sums)
                                     : detail::mxfp4_encode_sums_portable(in.data(), rows, k, rule, got.codes.data(), got.scales.data(), &sums);
          }
          SCOPED_TRACE("input " + std::to_string(input));
          ASSERT_EQ(first_difference(want.codes, got.codes), -1);
          ASSERT_EQ(first_difference(want.scales, got.scales), -1);
          EXPECT_EQ(nonfinite, kind == 2 ? nonfinite_blocks_want : 0u);
          EXPECT_EQ(bits(sums.sum_sq_ref), bits(want_sums.sum_sq_ref)) << sums.sum_sq_ref << " vs " << want_sums.sum_sq_ref;
          EXPECT_EQ(bits(sums.sum_sq_err), bits(want_sums.sum_sq_err)) << sums.sum_sq_err << " vs " << want_sums.sum_sq_err;
          EXPECT_EQ(bits(sums.max_abs_err), bits(want_sums.max_abs_err)) << sums.max_abs_err << " vs " << want_sums.max_abs_err;
        }
      }
}

TEST(Mxfp4, SearchPicksTheLargerScaleOnlyWhenItIsStrictlyBetter) {
  // All 7.5: floor rule e = 0 saturates to 6 (error 1.5 each); e + 1 gives 4 * 2 = 8 (error 0.5).
  std::vector<float> x(32, 7.5f);
  EXPECT_EQ(encode_ref(x, 1, 32, Mxfp4ScaleRule::kOcpFloor).scales[0], 127);
  EXPECT_EQ(encode_ref(x, 1, 32, Mxfp4ScaleRule::kSearch).scales[0], 128);
  // Never above 2^125: 2^127 * 7.5 / 4 would take e + 1 = 126, whose 4 * 2^126 overflows.
  std::fill(x.begin(), x.end(), 0x1p127f * 1.875f);
  EXPECT_EQ(encode_ref(x, 1, 32, Mxfp4ScaleRule::kSearch).scales[0], 127 + 125);
  EXPECT_EQ(encode_fast(x, 1, 32, Mxfp4ScaleRule::kSearch).scales[0], 127 + 125);
  // All 7: 6 (error 1) against 8 (error 1): a tie keeps the floor rule.
  std::fill(x.begin(), x.end(), 7.f);
  EXPECT_EQ(encode_ref(x, 1, 32, Mxfp4ScaleRule::kSearch).scales[0], 127);
  // Random blocks: the search never has a larger squared error than the floor rule.
  IRIS_SEED_TRACE();
  std::mt19937 rng(test::seed());
  const auto r = test::random_weights(32 * 512, 1.f, rng);
  const auto yf = decode_ref(encode_ref(r, 512, 32, Mxfp4ScaleRule::kOcpFloor), 512, 32);
  const auto ys = decode_ref(encode_ref(r, 512, 32, Mxfp4ScaleRule::kSearch), 512, 32);
  for (int b = 0; b < 512; ++b) {
    double ef = 0, es = 0;
    for (int i = b * 32; i < b * 32 + 32; ++i) {
      ef += (double(r[i]) - yf[i]) * (double(r[i]) - yf[i]);
      es += (double(r[i]) - ys[i]) * (double(r[i]) - ys[i]);
    }
    EXPECT_LE(es, ef * (1 + 1e-12)) << "block " << b;
  }
}

}  // namespace
}  // namespace iris::quant
