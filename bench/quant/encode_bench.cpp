// Encode throughput of each fast CPU encoder of quant/, in GB/s of BF16 input (the bytes a
// conversion reads), on one thread and on every core.
//   iris_encode_bench [MB=256] [--fp32]   (--fp32 also times the one-pass encoders' AVX2 and portable paths, forced)
// Input: MB megabytes of BF16 weights, N(0, 0.02) with 0.1% outliers at 20x (no zeros), as
// a [MB*1e6/2/4096, 4096] matrix. By default the BF16-input encoders run on it directly;
// --fp32 widens it to FP32 first (not timed) and runs the FP32-input encoders (throughput
// still counted in BF16 bytes, so the two columns compare). Best of 3 runs. The "+ error sums"
// rows are the one-pass encoders a conversion runs (codes, scales and the quality sums).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "common/float_bits.h"
#include "common/parallel_for.h"
#include "quant/error_sums.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"

using namespace iris;
using namespace iris::quant;

int main(int argc, char** argv) {
  uint64_t mb = 256;
  bool fp32 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fp32") == 0) fp32 = true;
    else mb = std::strtoull(argv[i], nullptr, 10);
  }
  const uint64_t k = 4096, rows = std::max<uint64_t>(1, mb * 1000000 / 2 / k), n = rows * k;
  std::vector<uint16_t> bf16(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (uint64_t i = 0; i < n; ++i) {
    float v = dist(rng);
    if (v == 0) v = 1e-3f;
    bf16[i] = f32_to_bf16(i % 997 == 0 ? 20 * v : v);
  }
  std::vector<float> f32;
  if (fp32) {
    f32.resize(n);
    for (uint64_t i = 0; i < n; ++i) f32[i] = bf16_to_f32(bf16[i]);
  }
  const uint16_t* x16 = bf16.data();
  const float* x32 = f32.data();
  std::vector<uint8_t> codes(n), scales(n / 32);
  std::vector<float> fscales(n / 128 + 1);
  Nf4DoubleQuant nq;
  auto fp8 = [&](Fp8Granularity g) {
    if (fp32) fp8_encode(x32, 1, rows, k, g, 128, 128, codes.data(), fscales.data());
    else fp8_encode_bf16(x16, 1, rows, k, g, 128, 128, codes.data(), fscales.data());
  };
  auto mxfp4 = [&](Mxfp4ScaleRule rule) {
    if (fp32) mxfp4_encode(x32, rows, k, rule, codes.data(), scales.data());
    else mxfp4_encode_bf16(x16, rows, k, rule, codes.data(), scales.data());
  };
  // The one-pass encoders with the quality report's error sums (what the converter runs), on
  // pieces of 128 rows spread over the threads, each piece serial, as a converter's workers do:
  // the dispatched path (kBest, BF16 or FP32 input as chosen), or one path forced (FP32 input,
  // as the forcing entries take it; --fp32 only).
  enum class Path { kBest, kAvx2, kPortable };
  auto with_sums = [&](bool fp8_block, Path path) {
    const int64_t pieces = int64_t((rows + 127) / 128);
    std::vector<ErrorSums> sums(static_cast<size_t>(pieces));
    iris::parallel_for(pieces, 1, [&](int64_t p) {
      const uint64_t r0 = uint64_t(p) * 128, nr = std::min<uint64_t>(128, rows - r0);
      const float* f = x32 + r0 * k;
      const uint16_t* h = x16 + r0 * k;
      ErrorSums* s = &sums[size_t(p)];
      uint64_t nonfinite = 0;
      if (fp8_block) {
        uint8_t* c = codes.data() + r0 * k;
        float* sc = fscales.data() + p * (k / 128);
        if (path == Path::kAvx2) detail::fp8_encode_sums_avx2(f, nr, k, Fp8Granularity::kBlock, 128, 128, c, sc, s, &nonfinite);
        else if (path == Path::kPortable) detail::fp8_encode_sums_portable(f, nr, k, Fp8Granularity::kBlock, 128, 128, c, sc, s);
        else if (fp32) fp8_encode_sums(f, nr, k, Fp8Granularity::kBlock, 128, 128, c, sc, s);
        else fp8_encode_sums_bf16(h, nr, k, Fp8Granularity::kBlock, 128, 128, c, sc, s);
      } else {
        uint8_t* c = codes.data() + r0 * k / 2;
        uint8_t* sc = scales.data() + r0 * k / 32;
        const auto rule = Mxfp4ScaleRule::kOcpFloor;
        if (path == Path::kAvx2) detail::mxfp4_encode_sums_avx2(f, nr, k, rule, c, sc, s, &nonfinite);
        else if (path == Path::kPortable) detail::mxfp4_encode_sums_portable(f, nr, k, rule, c, sc, s);
        else if (fp32) mxfp4_encode_sums(f, nr, k, rule, c, sc, s);
        else mxfp4_encode_sums_bf16(h, nr, k, rule, c, sc, s);
      }
    });
  };
  struct Case {
    const char* name;
    std::function<void()> run;
  };
  const std::vector<Case> cases = {
      {"mxfp4 (ocp floor)", [&] { mxfp4(Mxfp4ScaleRule::kOcpFloor); }},
      {"mxfp4 (search)", [&] { mxfp4(Mxfp4ScaleRule::kSearch); }},
      {"nf4 double quant", [&] { fp32 ? nf4_encode_dq(x32, n, &nq) : nf4_encode_dq_bf16(x16, n, &nq); }},
      {"fp8 tensor", [&] { fp8(Fp8Granularity::kTensor); }},
      {"fp8 channel", [&] { fp8(Fp8Granularity::kChannel); }},
      {"fp8 block 128x128", [&] { fp8(Fp8Granularity::kBlock); }},
      {"mxfp4 + error sums", [&] { with_sums(false, Path::kBest); }},
      {"fp8 block + sums", [&] { with_sums(true, Path::kBest); }},
  };
  // Each vector path of the one-pass encoders forced, so that one machine measures the paths
  // of the CPUs it is not (the AVX2 rows only where this CPU has AVX2).
  std::vector<Case> all_cases = cases;
  if (fp32) {
#if defined(__x86_64__) && defined(__GNUC__)
    const bool avx2 = __builtin_cpu_supports("avx2");
#else
    const bool avx2 = false;
#endif
    if (avx2) {
      all_cases.push_back({"mxfp4+sums, AVX2", [&] { with_sums(false, Path::kAvx2); }});
      all_cases.push_back({"fp8 blk+sums, AVX2", [&] { with_sums(true, Path::kAvx2); }});
    }
    all_cases.push_back({"mxfp4+sums, portable", [&] { with_sums(false, Path::kPortable); }});
    all_cases.push_back({"fp8 blk+sums, portable", [&] { with_sums(true, Path::kPortable); }});
  }
  const int all = iris::parallel_threads();
  std::printf("%.0f MB of BF16 input (%llu x %llu), %s-input encoders, %d threads\n%-20s %14s %14s\n", double(n) * 2 / 1e6,
              (unsigned long long)rows, (unsigned long long)k, fp32 ? "FP32" : "BF16", all, "encoder", "1 thread GB/s",
              "all GB/s");
  for (const auto& c : all_cases) {
    double gbps[2];
    for (int t = 0; t < 2; ++t) {
      iris::ThreadLimit limit(t == 0 ? 1 : all);
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        const auto a = std::chrono::steady_clock::now();
        c.run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      }
      gbps[t] = double(n) * 2 / best / 1e9;
    }
    std::printf("%-20s %14.2f %14.2f\n", c.name, gbps[0], gbps[1]);
  }
  return 0;
}
