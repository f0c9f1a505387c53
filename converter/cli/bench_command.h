// `iris bench`: kernel timings on this machine's GPU (bench/kernels/kernel_bench.h), as a table or JSON.
#pragma once

#include <string>
#include <vector>

namespace iris {

struct BenchCommandOptions {
  std::string archive;                 // bench the quantized tensors of an archive (their descriptors)
  std::vector<std::string> synthetic;  // FORMAT:SHAPE, e.g. nf4:14336x4096
  std::vector<int> batches = {1, 16};
  std::string peers;                   // JSON of peer timings from bench/peers.py (same run)
  std::string tile = "16x256";         // tile_n x tile_k of synthetic cases (shrunk for small matrices)
  std::vector<std::string> variants;   // NAME=VALUE kernel variants (kernels/tuning.h)
  int replays = 50;
  bool floors = false;                 // also time the floors of each case's byte counts
  bool l2_hot = false;                 // every launch on the same inputs (L2-resident where they fit)
  bool json = false;
};

int run_bench_command(const BenchCommandOptions& options);

}  // namespace iris
