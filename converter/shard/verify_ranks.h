// `iris verify --ranks DIR [--against WHOLE.iris]`: proves a folder of rank archives (`iris
// shard`, `iris convert --tp`) is one complete, consistent tensor-parallel set:
// - every rank of the world present once, each a valid archive whose checksums hold, all of one
//   sharding (world, tp, ep, source archive, logical tensor names);
// - every element of every logical tensor held exactly once, or replicated (the same box, the
//   same bytes, on several ranks) by the split rules;
// - with --against, the source archive itself: each rank's decode equal bit for bit to the
//   matching box of the whole archive's decode (CPU reference), raw tensors byte for byte.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace iris {

struct RanksVerifyOptions {
  std::string folder;
  std::string against;  // the whole archive the ranks were cut from ("": not compared)
  // "cuda": also every quantized tensor of every rank through the GPU dequant kernel, bit for
  // bit its CPU reference decode (verify/device_checks.h); with `against`, the GPU decode of
  // each box is then the whole archive's box too.
  std::string device = "cpu";
};

struct RanksVerifyReport {
  uint32_t world = 0;
  uint64_t logical_tensors = 0, boxes = 0, replicas = 0, compared = 0;
  uint64_t gpu_checks = 0;  // --device cuda: GPU checks run (per quantized tensor: dequant F32 and BF16, the GEMV probe)
  std::vector<std::string> failures;  // each names the rank file and the tensor
  bool ok() const { return failures.empty(); }
  nlohmann::json to_json() const;
};

// An error status when the folder cannot be read as ranks at all (no rank files, a file that is
// not an archive); otherwise the report, whose failures say what does not hold.
Result<RanksVerifyReport> verify_ranks(const RanksVerifyOptions& o);

}  // namespace iris
