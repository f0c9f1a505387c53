// Encode throughput of each CPU encoder in GB/s of BF16 input (the source bytes a
// conversion reads), single-threaded and on every core.
//   iris_encode_bench [MB=256]
// Includes the BF16 -> FP32 widening, as convert does it. Random N(0, 0.02) data with
// outliers, never zeros.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "common/float_bits.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"

using namespace iris;

int main(int argc, char** argv) {
  const uint64_t mb = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const uint64_t k = 4096, rows = mb * 1000000 / 2 / k, n = rows * k;
  std::vector<uint16_t> bf16(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (uint64_t i = 0; i < n; ++i) bf16[i] = f32_to_bf16(i % 997 == 0 ? 20 * dist(rng) : dist(rng));
  std::vector<float> x(n);
  std::vector<uint8_t> codes(n), scales(n / 16);
  std::vector<float> fscales(n / 128);
  auto widen = [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < int64_t(n); ++i) x[i] = bf16_to_f32(bf16[i]);
  };
  struct Case {
    const char* name;
    std::function<void()> run;
  };
  quant::Nf4DoubleQuant nq;
  std::vector<Case> cases = {
      {"mxfp4 (ocp)", [&] { quant::mxfp4_encode(x.data(), rows, k, quant::Mxfp4ScaleRule::kOcpFloor, codes.data(), scales.data()); }},
      {"mxfp4 (search)", [&] { quant::mxfp4_encode(x.data(), rows, k, quant::Mxfp4ScaleRule::kSearch, codes.data(), scales.data()); }},
      {"nf4 double quant", [&] { quant::nf4_encode_dq(x.data(), n, &nq); }},
      {"fp8 tensor", [&] { quant::fp8_encode(x.data(), 1, rows, k, quant::Fp8Granularity::kTensor, 128, 128, codes.data(), fscales.data()); }},
      {"fp8 channel", [&] { quant::fp8_encode(x.data(), 1, rows, k, quant::Fp8Granularity::kChannel, 128, 128, codes.data(), fscales.data()); }},
      {"fp8 block 128", [&] { quant::fp8_encode(x.data(), 1, rows, k, quant::Fp8Granularity::kBlock, 128, 128, codes.data(), fscales.data()); }},
  };
  const int all = omp_get_max_threads();
  std::printf("%.0f MB of BF16 input (%llu x %llu), %d cores\n%-18s %14s %14s\n", n * 2 / 1e6, (unsigned long long)rows,
              (unsigned long long)k, all, "encoder", "1 thread GB/s", "all GB/s");
  for (auto& c : cases) {
    double gbps[2];
    for (int t = 0; t < 2; ++t) {
      omp_set_num_threads(t == 0 ? 1 : all);
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        auto a = std::chrono::steady_clock::now();
        widen();
        c.run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      }
      gbps[t] = n * 2 / best / 1e9;
    }
    std::printf("%-18s %14.2f %14.2f\n", c.name, gbps[0], gbps[1]);
  }
  return 0;
}
