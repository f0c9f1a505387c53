// GPU kernel benchmark behind `iris bench` (the tool's, not the library's: engines link none of it): times dequant and GEMV per format and shape,
// against the card's own copy bandwidth measured in the same run.
//
// Method (docs/BENCHMARKS.md): inputs rotated over enough copies to exceed twice the L2,
// launches captured in a CUDA graph and replayed (so launch gaps do not dominate kernels of a
// few microseconds), medians of CUDA-event timings over the replays, random data (never zeros).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "formats/tensor_desc.h"
#include "kernels/launch_config.h"

namespace iris {

struct BenchCase {
  std::string name;          // "mxfp4 14336x4096"
  TensorDesc desc;           // format, shape, params, layout (synthetic)
  std::vector<int> batches;  // GEMV batch sizes to time (empty: dequant only)
};

struct BenchOptions {
  int replays = 50;   // timed graph replays per kernel
  int warmup = 5;
  int device = 0;
  KernelVariants variants;  // what to time (default: the measured best)
  bool nf4_bf16_table = false;  // NF4's declared BF16 table (LaunchConfig::nf4_bf16_table)
  bool nf4_absmax_bf16 = true;  // with it, the absmax as one BF16 a block, as an upload has it ("nf4-absmax=inline": not)
  // Also time, per case, the floors of its byte counts: a kernel that only reads the GEMV's
  // input ("floor-read") and one that reads the dequant's input while writing its output
  // ("floor-stream"), timed like the kernels.
  bool floors = false;
  // Every launch of a case's graph on the same inputs, which then stay in L2 where they fit:
  // what a kernel takes when its weights were brought into L2 ahead of it (an upper bound on
  // what an L2 prefetch can give), against the default's inputs rotated past the L2.
  bool l2_hot = false;
};

// Sets "dequant-unroll" (auto|1|2|4|8), "dequant-item" (auto|8|16), "gemv" (auto|cuda-cores), "gemv-unroll" (auto|1|2), "gemv-prefetch" (auto|off|on),
// "programmatic" (auto|off|on|late), "gemv-l2-prefetch" (auto|off|on), "gemv-spread" (auto|off|on), "gemv-blocks" (auto|1..32), "gemv-warps" (auto|1..16), "nf4-lookup" (auto|smem|permute),
// "fp8-decode" (auto|cvt|bits), "nf4-scaled" (auto|off|on), "nf4-chunk" (auto|64|128), "nf4-table" (auto|split|pairs, or bf16: the declared BF16 table,
// options->nf4_bf16_table), "nf4-absmax" (auto|precomputed|inline: options->nf4_absmax_bf16) or the measurement aids
// "gemv-probe" (off|skip-decode|nf4-skip-absmax|nf4-skip-table) / "dequant-probe" (off|skip-decode) in options->variants;
// an unknown name or value is kInvalidArgument.
Status parse_kernel_variant(const std::string& name, const std::string& value, BenchOptions* options);

// Returns {"device", "copy_gbps" (the better of cudaMemcpy and a 16-byte copy kernel, both
// also given),  "l2_bytes", "results": [{kernel, case, us, gbps, pct_copy, bytes}]}.
Result<nlohmann::json> run_kernel_bench(const std::vector<BenchCase>& cases, const BenchOptions& options);

// Synthetic descriptors for a shape like "14336x4096" or "32x5760x2880".
// Tiles of tile_n x tile_k, shrunk for small matrices as the converter does.
Result<TensorDesc> synthetic_desc(const std::string& format, const std::string& shape, uint64_t tile_n = kDefaultTileN,
                                  uint64_t tile_k = kDefaultTileK);

}  // namespace iris
