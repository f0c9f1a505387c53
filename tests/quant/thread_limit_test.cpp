// The fast codecs split their loops over threads (common/parallel_for.h): whatever the number
// of threads, they give their scalar oracle's bytes. Inputs large enough that every loop goes
// parallel (several kGrainValues), with awkward sizes (k not a multiple of the block, a short
// last block) and NaN, Inf, zero and subnormal values among them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/parallel_for.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "quant/nonfinite.h"

namespace iris::quant {
namespace {

std::vector<float> random_values(uint64_t n, uint32_t seed, bool hostile) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  if (hostile)
    for (uint64_t i = 17; i < n; i += 40009) {
      v[i] = std::numeric_limits<float>::quiet_NaN();
      v[i + 1] = 0.f;
      v[i + 2] = 1e-40f;
      v[i + 3] = -std::numeric_limits<float>::infinity();
    }
  return v;
}

constexpr int kLimits[] = {1, 3, 8};

TEST(ThreadLimit, Mxfp4EncodeAndDecodeMatchTheOracle) {
  const uint64_t rows = 301, k = 1000;  // k: 31 whole blocks and one of 8
  const auto x = random_values(rows * k, 1, false);
  std::vector<uint8_t> rc(rows * mxfp4_row_bytes(k)), rs(rows * mxfp4_row_scales(k));
  mxfp4_encode_ref(x.data(), rows, k, Mxfp4ScaleRule::kOcpFloor, rc.data(), rs.data());
  std::vector<float> rd(rows * k);
  mxfp4_decode_ref(rc.data(), rs.data(), rows, k, rd.data());
  for (int limit : kLimits) {
    ThreadLimit scope(limit);
    std::vector<uint8_t> c(rc.size()), s(rs.size());
    mxfp4_encode(x.data(), rows, k, Mxfp4ScaleRule::kOcpFloor, c.data(), s.data());
    EXPECT_EQ(c, rc) << limit << " threads";
    EXPECT_EQ(s, rs) << limit << " threads";
    std::vector<float> d(rows * k);
    mxfp4_decode(rc.data(), rs.data(), rows, k, d.data());
    EXPECT_EQ(std::memcmp(d.data(), rd.data(), d.size() * 4), 0) << limit << " threads";
  }
}

TEST(ThreadLimit, Nf4EncodeAndDecodeMatchTheOracle) {
  const uint64_t n = 777777;  // odd: a short last block and a padding nibble
  const auto x = random_values(n, 2, false);
  Nf4DoubleQuant ref;
  nf4_encode_dq_ref(x.data(), n, &ref);
  for (int limit : kLimits) {
    ThreadLimit scope(limit);
    Nf4DoubleQuant q;
    nf4_encode_dq(x.data(), n, &q);
    EXPECT_EQ(q.codes, ref.codes) << limit << " threads";
    EXPECT_EQ(q.absmax_codes, ref.absmax_codes) << limit << " threads";
    EXPECT_EQ(std::memcmp(q.nested_absmax.data(), ref.nested_absmax.data(), ref.nested_absmax.size() * 4), 0) << limit;
    EXPECT_EQ(std::memcmp(&q.offset, &ref.offset, 4), 0) << limit << " threads";
    Bnb4bitParams p;
    p.double_quant = true;
    p.absmax_codes = ref.absmax_codes.data();
    p.nested_absmax = ref.nested_absmax.data();
    p.nested_offset = ref.offset;
    std::vector<float> want(n), got(n);
    bnb4_decode_ref(ref.codes.data(), 0, n, p, want.data());
    bnb4_decode(ref.codes.data(), n, p, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << limit << " threads";
  }
}

TEST(ThreadLimit, Fp8EncodeAndDecodeMatchTheOracle) {
  const uint64_t n = 333, k = 1100;  // partial edge tiles on both axes
  const auto x = random_values(n * k, 3, false);
  for (Fp8Granularity g : {Fp8Granularity::kTensor, Fp8Granularity::kChannel, Fp8Granularity::kBlock}) {
    const uint64_t nscales = g == Fp8Granularity::kTensor ? 1 : g == Fp8Granularity::kChannel ? n : ((n + 127) / 128) * ((k + 127) / 128);
    std::vector<uint8_t> rc(n * k);
    std::vector<float> rs(nscales);
    fp8_encode_ref(x.data(), 1, n, k, g, 128, 128, rc.data(), rs.data());
    Fp8Scales sc;
    sc.granularity = g;
    sc.data = rs.data();
    std::vector<float> rd(n * k);
    fp8_decode_ref(rc.data(), 1, n, k, sc, rd.data());
    for (int limit : kLimits) {
      ThreadLimit scope(limit);
      std::vector<uint8_t> c(n * k);
      std::vector<float> s(nscales);
      fp8_encode(x.data(), 1, n, k, g, 128, 128, c.data(), s.data());
      EXPECT_EQ(c, rc) << int(g) << ", " << limit << " threads";
      EXPECT_EQ(std::memcmp(s.data(), rs.data(), nscales * 4), 0) << int(g) << ", " << limit << " threads";
      std::vector<float> d(n * k);
      fp8_decode(rc.data(), 1, n, k, sc, d.data());
      EXPECT_EQ(std::memcmp(d.data(), rd.data(), d.size() * 4), 0) << int(g) << ", " << limit << " threads";
    }
  }
}

TEST(ThreadLimit, NonfiniteCountAndFirstIndex) {
  const uint64_t n = 1000003;
  const auto x = random_values(n, 4, true);
  uint64_t want = 0, want_first = n;
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) {
      want += 1;
      if (want_first == n) want_first = i;
    }
  ASSERT_GT(want, 2u);
  for (int limit : kLimits) {
    ThreadLimit scope(limit);
    uint64_t first = 0;
    EXPECT_EQ(count_nonfinite(x.data(), n, &first), want) << limit << " threads";
    EXPECT_EQ(first, want_first) << limit << " threads";
  }
}

}  // namespace
}  // namespace iris::quant
