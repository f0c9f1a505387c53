// Shared helpers of the quant tests: a fresh random seed per run (printed with every
// failure; IRIS_TEST_SEED=<n> replays one), random weights, bit comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/float_bits.h"

namespace iris::quant::test {

inline uint32_t seed() {
  static const uint32_t s = [] {
    if (const char* e = std::getenv("IRIS_TEST_SEED")) return uint32_t(std::strtoul(e, nullptr, 10));
    return uint32_t(std::random_device{}());
  }();
  return s;
}

#define IRIS_SEED_TRACE() SCOPED_TRACE("random seed " + std::to_string(::iris::quant::test::seed()) + " (IRIS_TEST_SEED replays it)")

// N(0, sigma) weights with about 1% outliers at 20x, as real checkpoints have.
inline std::vector<float> random_weights(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> d(0.f, sigma);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (auto& x : v) x = pick(rng) == 0 ? 20.f * d(rng) : d(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return int64_t(i);
  return -1;
}

}  // namespace iris::quant::test
