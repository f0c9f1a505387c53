// The parts of the per-architecture paths that the CPU can check (no GPU needed): which GEMV
// path each loaded-code architecture gets, and the integer half of the FP8 bit decode on
// every E4M3 code. The kernels themselves run in kernel_cases_test.cpp on the GPU machine,
// from the release build and from the PTX-only builds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/float_bits.h"
#include "kernels/arch.cuh"
#include "kernels/e4m3_bits.h"
#include "kernels/kernels.h"
#include "kernels/tuning.h"
#include "quant/tables.h"

namespace iris {
namespace {

QuantView tiled_mxfp4() {
  QuantView v{};
  v.format = ViewFormat::kMxfp4;
  v.rows = v.n = v.padded_n = 32;
  v.k = v.padded_k = v.tile_k = 256;
  v.tile_n = 16;
  v.tiled = true;
  v.codes_planes = true;  // as uploads leave MXFP4 codes
  return v;
}

TEST(ArchPaths, TheTensorCoreGemvNeedsCodeBuiltForSm80) {
  const QuantView v = tiled_mxfp4();
  for (int arch : {75, 80, 86, 89, 90, 100}) {
    LaunchConfig c{132, arch, {}};
    EXPECT_EQ(cuda_gemv_uses_tensor_cores(v, 1, c), arch >= 80) << "kernel_arch " << arch;
    c.variants.gemv_tensor_cores = false;
    EXPECT_FALSE(cuda_gemv_uses_tensor_cores(v, 1, c)) << "kernel_arch " << arch;
  }
  EXPECT_FALSE(cuda_gemv_uses_tensor_cores(v, 1, LaunchConfig{132, 0, {}})) << "an unknown architecture gets the CUDA cores";
  QuantView nibbles = v;
  nibbles.codes_planes = false;
  EXPECT_FALSE(cuda_gemv_uses_tensor_cores(nibbles, 1, LaunchConfig{132, 90, {}})) << "MXFP4 codes in the archive's nibble order";
}

TEST(ArchPaths, Fp8DecodesByBitsWhereTheConversionInstructionIsMissing) {
  EXPECT_TRUE(fp8_bit_decode(LaunchConfig{132, 80, {}}));
  EXPECT_TRUE(fp8_bit_decode(LaunchConfig{132, 86, {}}));
  LaunchConfig forced{132, 90, {}};
  forced.variants.fp8_decode = 2;
  EXPECT_TRUE(fp8_bit_decode(forced));
  forced.variants.fp8_decode = 1;
  EXPECT_FALSE(fp8_bit_decode(forced));
}

// bf16 bits -> double, exactly (every BF16 value, subnormals included, is a double).
double bf16_value(uint16_t h) { return double(bf16_to_f32(h)); }

TEST(ArchPaths, E4m3OnBf16BitsTimesTwoTo120IsTheE4m3ValueForEveryCode) {
  for (uint32_t b0 = 0; b0 < 256; ++b0) {
    const uint32_t b1 = (b0 * 37u + 11u) & 0xffu;  // a second code in the high half
    const uint32_t bits = e4m3_pair_to_bf16x2_scaled((b0 << 8) | (b1 << 24));
    EXPECT_EQ(kE4m3Bf16Rescale & 0xffffu, 0x7B80u);
    EXPECT_EQ(bf16_value(uint16_t(kE4m3Bf16Rescale)), std::ldexp(1.0, 120));
    const uint32_t codes[2] = {b0, b1};
    for (int h = 0; h < 2; ++h) {
      const uint32_t b = codes[h];
      const double got = bf16_value(uint16_t(bits >> (16 * h))) * std::ldexp(1.0, 120);
      const float want = quant::e4m3_to_f32(uint8_t(b));
      if ((b & 0x7f) == 0x7f) {
        EXPECT_EQ(got, 480.0 * ((b & 0x80) ? -1 : 1)) << "NaN code " << b << " decodes as +-480; the kernel catches it separately";
        continue;
      }
      EXPECT_EQ(got, double(want)) << "code " << b;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << "code " << b << " (the sign of zero)";
    }
  }
}

}  // namespace
}  // namespace iris
