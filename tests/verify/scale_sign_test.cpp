// FP8 block scales of any sign (issue 24 item 1). transformers' FineGrained FP8 quantizer can
// write negative `weight_scale_inv` blocks; weight = code x scale_inv stays well defined. The
// archive must decode to exactly that (checked against an E4M3 decoder written here from the
// format's definition, not the library's), `verify` must pass it with a counted warning, and
// only `--strict` fails it. NaN scales stay an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/quant/st_reader.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;

// E4M3 (FN): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7F/0xFF NaN, no infinity.
double e4m3_oracle(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

constexpr uint64_t kN = 256, kK = 384;  // a 2 x 3 grid of 128 x 128 blocks

struct Fp8Snapshot {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // [2, 3]
};

// One safetensors file holding `p.weight` (F8_E4M3 [kN, kK], no NaN codes) and its block
// scales, plus a config.json, in `dir`.
Fp8Snapshot write_snapshot(const std::string& dir, std::vector<float> scales, uint32_t seed) {
  Fp8Snapshot s;
  std::mt19937 rng(seed);
  s.codes.resize(kN * kK);
  for (auto& c : s.codes) {
    c = uint8_t(rng());
    if ((c & 0x7F) == 0x7F) c &= 0xFE;
  }
  s.scales = std::move(scales);
  std::string data(reinterpret_cast<const char*>(s.codes.data()), s.codes.size());
  data.append(reinterpret_cast<const char*>(s.scales.data()), s.scales.size() * 4);
  const nlohmann::json header = {
      {"p.weight", {{"dtype", "F8_E4M3"}, {"shape", {kN, kK}}, {"data_offsets", {0, kN * kK}}}},
      {"p.weight_scale_inv", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {kN * kK, kN * kK + 24}}}}};
  write_st(dir + "/model.safetensors", header.dump(), data);
  write_bytes(dir + "/config.json", R"({"model_type": "llama"})");
  return s;
}

TEST(ScaleSign, NegativeAndZeroBlockScalesDecodeAsCodeTimesScaleAndWarn) {
  TempDir d;
  std::uniform_real_distribution<float> mag(1e-4f, 4e-2f);
  std::mt19937 rng(std::random_device{}());
  std::vector<float> scales(6);
  for (auto& v : scales) v = (rng() & 1 ? -1.f : 1.f) * mag(rng);
  scales[0] = -std::fabs(scales[0]);  // at least one negative and one zero, wherever the rest fall
  scales[4] = 0.f;
  scales[5] = std::fabs(scales[5]);
  const uint32_t seed = rng();
  const Fp8Snapshot s = write_snapshot(d / "snap", scales, seed);
  uint64_t negative = 0;
  for (float v : scales) negative += v < 0;

  auto c = run("convert " + d / "snap" + " -o " + d / "a.iris -q");
  ASSERT_EQ(c.rc, 0) << c.out;

  auto v = run("verify " + d / "a.iris -q");
  EXPECT_EQ(v.rc, 0) << v.out;
  EXPECT_NE(v.out.find("WARN p.weight [fp8_e4m3] values:scales: " + std::to_string(negative) + " FP8 scales are negative and 1 zero"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find(", 0 failed, 1 warnings"), std::string::npos) << v.out;

  auto j = run("verify " + d / "a.iris --json -q");
  ASSERT_EQ(j.rc, 0) << j.out;
  const auto report = nlohmann::json::parse(j.out);
  EXPECT_EQ(report["warnings"], 1);
  EXPECT_EQ(report["ok"], true);

  auto junit = run("verify " + d / "a.iris -q --junit " + d / "r.xml");
  EXPECT_EQ(junit.rc, 0) << junit.out;
  EXPECT_NE(read_all(d / "r.xml").find("<system-out>WARNING: " + std::to_string(negative) + " FP8 scales are negative"), std::string::npos);

  auto strict = run("verify " + d / "a.iris -q --strict");
  EXPECT_EQ(strict.rc, 4) << strict.out;
  EXPECT_NE(strict.out.find("FAIL p.weight [fp8_e4m3] values:scales: " + std::to_string(negative) + " FP8 scales are negative"),
            std::string::npos)
      << strict.out;

  // The archive's decode is code x scale, with each block's own sign.
  auto e = run("export " + d / "a.iris -o " + d / "w.safetensors --dtype f32 -q");
  ASSERT_EQ(e.rc, 0) << e.out;
  quant::test::StFile out(d / "w.safetensors");
  const std::vector<float> got = out.at("p.weight").as<float>();
  ASSERT_EQ(got.size(), kN * kK);
  uint64_t wrong = 0;
  for (uint64_t r = 0; r < kN; ++r)
    for (uint64_t k = 0; k < kK; ++k) {
      const float want = float(e4m3_oracle(s.codes[r * kK + k]) * double(scales[(r / 128) * 3 + k / 128]));
      const float have = got[r * kK + k];
      wrong += std::memcmp(&want, &have, 4) != 0;  // bits, so a zero's sign counts too
    }
  EXPECT_EQ(wrong, 0u) << "seed " << seed;
}

TEST(ScaleSign, ANanScaleStaysAnErrorWithoutStrict) {
  TempDir d;
  write_snapshot(d / "snap", {0.01f, NAN, 0.02f, 0.03f, 0.04f, 0.05f}, 7);
  auto c = run("convert " + d / "snap" + " -o " + d / "a.iris -q");
  ASSERT_EQ(c.rc, 0) << c.out;
  auto v = run("verify " + d / "a.iris -q");
  EXPECT_EQ(v.rc, 4) << v.out;
  EXPECT_NE(v.out.find("values:scales: 1 FP8 scales are NaN or infinite"), std::string::npos) << v.out;
}

}  // namespace
}  // namespace iris
