// add_error_sums (quant/error_sums.h) against a plain double loop over the finite sources, on
// random values with NaN and infinities among them and lengths around the lane, group and
// block sizes, and on values whose squares leave float's range; and the same bits whatever
// the thread count.
#include "quant/error_sums.h"

#include "common/parallel_for.h"
#include "quant/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace iris::quant {
namespace {

ErrorSums oracle(const std::vector<float>& ref, const std::vector<float>& got) {
  ErrorSums s;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;
    const double e = double(got[i]) - double(ref[i]);
    s.sum_sq_ref += double(ref[i]) * double(ref[i]);
    s.sum_sq_err += e * e;
    s.max_abs_err = std::max(s.max_abs_err, std::fabs(e));
  }
  return s;
}

TEST(ErrorSums, EqualsThePlainLoopOverFiniteSources) {
  std::mt19937 rng(20261123);
  std::normal_distribution<float> w(0.f, 0.05f), noise(0.f, 0.002f);
  for (uint64_t n : {0ull, 1ull, 7ull, 8ull, 9ull, 1000ull, 65535ull, 65536ull, 65537ull, 300001ull}) {
    std::vector<float> ref(n), got(n);
    for (uint64_t i = 0; i < n; ++i) {
      ref[i] = w(rng);
      got[i] = ref[i] + noise(rng);
    }
    if (n > 20) {  // non-finite sources are left out, whatever their decode
      ref[3] = std::numeric_limits<float>::quiet_NaN();
      ref[11] = std::numeric_limits<float>::infinity();
      ref[n - 1] = -std::numeric_limits<float>::infinity();
      got[n - 1] = 1e30f;
    }
    const ErrorSums want = oracle(ref, got);
    ErrorSums s;
    add_error_sums(ref.data(), got.data(), n, &s);
    // Float partial sums of 16 terms: a few roundings of 2^-24 each.
    EXPECT_NEAR(s.sum_sq_ref, want.sum_sq_ref, 1e-6 * want.sum_sq_ref) << n;
    EXPECT_NEAR(s.sum_sq_err, want.sum_sq_err, 1e-6 * want.sum_sq_err) << n;
    EXPECT_EQ(s.max_abs_err, double(float(want.max_abs_err))) << n;  // the exact maximum, rounded once
  }
}

// Groups whose squares overflow float (|x| near 1e30) or would vanish in it (near 1e-30) are
// summed in double: the sums keep their relative precision at both ends of the range.
TEST(ErrorSums, ValuesBeyondTheRangeOfFloatSquares) {
  std::mt19937 rng(11);
  std::normal_distribution<float> w(0.f, 1.f), noise(0.f, 0.01f);
  for (float scale : {1e30f, 1e-30f, 1e-42f}) {
    for (uint64_t n : {255ull, 256ull, 4096ull, 70000ull}) {
      std::vector<float> ref(n), got(n);
      for (uint64_t i = 0; i < n; ++i) {
        ref[i] = w(rng) * scale;
        got[i] = ref[i] + noise(rng) * scale;
      }
      if (n > 300) ref[n / 2] = 1.f;  // one ordinary value among extreme ones
      const ErrorSums want = oracle(ref, got);
      ErrorSums s;
      add_error_sums(ref.data(), got.data(), n, &s);
      SCOPED_TRACE(std::to_string(scale) + " x " + std::to_string(n));
      ASSERT_TRUE(std::isfinite(s.sum_sq_ref) && std::isfinite(s.sum_sq_err));
      EXPECT_NEAR(s.sum_sq_ref, want.sum_sq_ref, 1e-6 * want.sum_sq_ref);
      EXPECT_NEAR(s.sum_sq_err, want.sum_sq_err, 1e-6 * want.sum_sq_err);
      EXPECT_EQ(s.max_abs_err, double(float(want.max_abs_err)));
    }
  }
}

TEST(ErrorSums, AddsToWhatWasThere) {
  const std::vector<float> ref = {1.f, 2.f}, got = {1.5f, 2.f};
  ErrorSums s{10.0, 1.0, 0.75};
  add_error_sums(ref.data(), got.data(), 2, &s);
  EXPECT_EQ(s.sum_sq_ref, 15.0);
  EXPECT_EQ(s.sum_sq_err, 1.25);
  EXPECT_EQ(s.max_abs_err, 0.75);
}

// Every vector path the CPU can run (AVX-512, AVX2 by hand, portable) gives the portable
// path's bits, whatever the process's own path: random values mixed with NaN, infinities,
// zeros, subnormals and values whose squares leave float's range (the exact redo of a group),
// at lengths around the lane, group and block sizes.
TEST(ErrorSums, EveryVectorPathGivesThePortableBits) {
  std::mt19937 rng(20261128);
  std::normal_distribution<float> w(0.f, 0.05f), noise(0.f, 0.002f);
  std::uniform_int_distribution<int> pick(0, 99);
  const float hostile[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 0.f, -0.f, 1e-42f, -3e-39f, 1e30f, -2e25f, 1e-30f,
                           std::numeric_limits<float>::max()};
  for (uint64_t n : {1ull, 15ull, 16ull, 255ull, 256ull, 257ull, 4111ull, 65536ull, 65551ull, 200000ull}) {
    std::vector<float> ref(n), got(n);
    for (uint64_t i = 0; i < n; ++i) {
      ref[i] = w(rng);
      got[i] = ref[i] + noise(rng);
      const int p = pick(rng);
      if (p < 3) ref[i] = hostile[rng() % std::size(hostile)];
      else if (p < 5) got[i] = hostile[rng() % std::size(hostile)];
    }
    ErrorSums want;
    add_error_sums(detail::CpuPath::kPortable, ref.data(), got.data(), n, &want);
    for (auto path : {detail::CpuPath::kAvx2, detail::CpuPath::kAvx512}) {
      if (path > detail::cpu_best_path()) continue;  // a path this CPU cannot run
      ErrorSums s;
      add_error_sums(path, ref.data(), got.data(), n, &s);
      SCOPED_TRACE(std::string(detail::cpu_path_name(path)) + ", n = " + std::to_string(n));
      EXPECT_EQ(std::memcmp(&s.sum_sq_ref, &want.sum_sq_ref, 8), 0) << s.sum_sq_ref << " vs " << want.sum_sq_ref;
      EXPECT_EQ(std::memcmp(&s.sum_sq_err, &want.sum_sq_err, 8), 0) << s.sum_sq_err << " vs " << want.sum_sq_err;
      EXPECT_EQ(std::memcmp(&s.max_abs_err, &want.max_abs_err, 8), 0) << s.max_abs_err << " vs " << want.max_abs_err;
    }
  }
}

TEST(ErrorSums, SameBitsWithOneThreadOrMany) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const uint64_t n = 1000003;
  std::vector<float> ref(n), got(n);
  for (uint64_t i = 0; i < n; ++i) {
    ref[i] = d(rng);
    got[i] = d(rng);
  }
  ErrorSums one, many;
  {
    iris::ThreadLimit limit(1);
    add_error_sums(ref.data(), got.data(), n, &one);
  }
  {
    iris::ThreadLimit limit(4);
    add_error_sums(ref.data(), got.data(), n, &many);
  }
  EXPECT_EQ(one.sum_sq_ref, many.sum_sq_ref);
  EXPECT_EQ(one.sum_sq_err, many.sum_sq_err);
  EXPECT_EQ(one.max_abs_err, many.max_abs_err);
}

}  // namespace
}  // namespace iris::quant
