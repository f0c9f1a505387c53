// The decoders' lookup of packed 4-bit codes (vectorised where the CPU allows) against a plain
// loop written here, for both nibble orders, every length from 0 to 70 bytes (the vector
// steps of 16 bytes and every tail) and unaligned starts.
#include "quant/nibble_lookup.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

using iris::quant::detail::lookup_nibbles;
using iris::quant::detail::lookup_nibbles_avx2;
using iris::quant::detail::NibbleOrder;

TEST(NibbleLookup, EqualsAPlainLoopForBothOrdersEveryLengthAndOffset) {
  std::mt19937 rng(7);
  float lut[16];
  for (int c = 0; c < 16; ++c) lut[c] = float(c * 3 + 1) * (c % 2 ? -0.25f : 1.5f);
  lut[5] = -0.0f;  // the bits are copied, sign of zero included
  std::vector<uint8_t> bytes(80);
  for (auto& b : bytes) b = uint8_t(rng());
  for (NibbleOrder order : {NibbleOrder::kHighFirst, NibbleOrder::kLowFirst}) {
    for (uint64_t start = 0; start < 3; ++start) {
      for (uint64_t n = 0; n <= 70; ++n) {
        std::vector<float> got(2 * n + 1, 99.f), want(2 * n);
        for (uint64_t j = 0; j < n; ++j) {
          const uint8_t b = bytes[start + j], hi = b >> 4, lo = b & 15;
          want[2 * j] = lut[order == NibbleOrder::kHighFirst ? hi : lo];
          want[2 * j + 1] = lut[order == NibbleOrder::kHighFirst ? lo : hi];
        }
        lookup_nibbles(bytes.data() + start, n, lut, order, got.data());
        if (n) {
          ASSERT_EQ(std::memcmp(got.data(), want.data(), n * 2 * sizeof(float)), 0) << "n " << n << " start " << start;
        }
        ASSERT_EQ(got[2 * n], 99.f) << "wrote past the end, n " << n;
        // The AVX2 path too, whatever the dispatch picks on this CPU (every path it can run).
        std::vector<float> avx2(2 * n + 1, 99.f);
        if (!lookup_nibbles_avx2(bytes.data() + start, n, lut, order, avx2.data())) continue;
        if (n) {
          ASSERT_EQ(std::memcmp(avx2.data(), want.data(), n * 2 * sizeof(float)), 0) << "AVX2, n " << n << " start " << start;
        }
        ASSERT_EQ(avx2[2 * n], 99.f) << "AVX2 wrote past the end, n " << n;
      }
    }
  }
}

}  // namespace
