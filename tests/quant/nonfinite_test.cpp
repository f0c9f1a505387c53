// count_nonfinite: counts NaN and +-Inf (never finite extremes) and finds the first.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "common/float_bits.h"
#include "quant/nonfinite.h"
#include "tests/quant/test_util.h"

namespace iris::quant {
namespace {

TEST(Nonfinite, CountsNanAndInfAndFindsTheFirst) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(300000, 1.f);
  x[7] = FLT_MAX;
  x[8] = -FLT_MAX;
  x[9] = 1e-45f;
  uint64_t first = 0;
  EXPECT_EQ(count_nonfinite(x.data(), x.size(), &first), 0u);
  EXPECT_EQ(first, x.size());
  x[200001] = std::nanf("");
  x[150000] = -inf;
  x[299999] = inf;
  EXPECT_EQ(count_nonfinite(x.data(), x.size(), &first), 3u);
  EXPECT_EQ(first, 150000u);
  EXPECT_EQ(count_nonfinite(x.data(), x.size(), nullptr), 3u);
  x[7] = x[8] = 3e38f;  // FLT_MAX itself rounds to Inf in BF16
  const auto h = test::to_bf16(x);
  EXPECT_EQ(count_nonfinite_bf16(h.data(), h.size(), &first), 3u);
  EXPECT_EQ(first, 150000u);
  EXPECT_EQ(count_nonfinite(nullptr, 0, &first), 0u);
  EXPECT_EQ(first, 0u);
}

}  // namespace
}  // namespace iris::quant
