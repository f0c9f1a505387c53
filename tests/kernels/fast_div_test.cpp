// kernels/fast_div.h against the hardware division, on the host (the device evaluates the
// same multiply-high expression with __umulhi). Runs without a GPU.
#include <gtest/gtest.h>

#include <random>

#include "kernels/fast_div.h"

namespace iris {
namespace {

void expect_all(uint32_t d, const std::vector<uint32_t>& ns) {
  const FastDiv f(d);
  for (uint32_t n : ns) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
}

TEST(FastDiv, SmallDivisorsExhaustiveDividends) {
  std::vector<uint32_t> ns(1 << 16);
  for (uint32_t i = 0; i < ns.size(); ++i) ns[i] = i;
  for (uint32_t d = 1; d <= 1100; ++d) expect_all(d, ns);
}

TEST(FastDiv, RandomDivisorsNearTheLimit) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> dn(0, (1u << 31) - 1), dd(1, (1u << 31) - 1);
  for (int i = 0; i < 2000; ++i) {
    const uint32_t d = i % 2 ? dd(rng) : (dd(rng) >> (i % 31)) + 1;
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 2};
    for (int j = 0; j < 200; ++j) ns.push_back(dn(rng));
    for (uint32_t m = 1; m < 64 && uint64_t(m) * d < (1u << 31); ++m) {  // around multiples of d
      ns.push_back(m * d - 1);
      ns.push_back(m * d);
    }
    expect_all(d, ns);
  }
}

TEST(FastDiv, PowersOfTwo) {
  std::vector<uint32_t> ns;
  for (uint32_t b = 0; b < 31; ++b) ns.insert(ns.end(), {(1u << b) - 1, 1u << b, (1u << b) + 1});
  for (uint32_t s = 0; s < 31; ++s) expect_all(1u << s, ns);
}

}  // namespace
}  // namespace iris
