// The peak memory a conversion will need, predicted from its plan before anything is decoded,
// and the chunk size that keeps it under a budget (convert --dry-run prints the prediction;
// --max-rss refuses up front a conversion that cannot meet it).
//
// The model (converter/pipeline/requantize.cpp is what it describes): a fixed base for the process,
// the manifest and the writer; the chunk buffers of each worker (one chunk in flight per
// worker), which are reused across tensors and so grow to the largest any tensor needs (FP32
// values and their decode-back, the codes before and after tiling, the source bytes of the
// chunk); the largest per-tensor transient (the side components waiting for their turn,
// NF4's block absmax, a quantized source's tables); and, when large copies are written beside
// requantized tensors, the second stream's buffers (formats/iris_writer.h).
#pragma once

#include <cstdint>
#include <vector>

#include "converter/sources/source_tensors.h"
#include "converter/pipeline/quant_policy.h"

namespace iris {

struct PlannedTensor {
  const SourceTensor* source;
  Target target;
  bool requantized;  // false: carried over byte for byte (streamed, no chunk buffers)
};

struct MemoryPlan {
  uint64_t chunk_floats = 0;  // the chunk size chosen
  int workers = 1;            // the chunks in flight at once (RequantOptions::workers)
  uint64_t peak_bytes = 0;    // predicted peak resident memory of the whole run
};

// Bytes every conversion holds whatever it converts: the binary and its libraries, the
// source's headers, the manifest, the writer's three 8 MiB buffers (measured with
// `/usr/bin/time -f %M iris convert SNAP -o X.iris`, lossless: 35.9 MB for the 1.83 GB
// snapshot of `iris_make_snapshot SNAP 2 2` with 4 MiB buffers; 8 MiB ones add 12 MiB, as
// measured on the same run by another tool, 17.6 -> 29.7 MiB, 2026-11-28; the slack covers
// larger manifests).
constexpr uint64_t kBaseRssBytes = 64ull << 20;
// The smallest chunk --max-rss may pick: below it the per-chunk overheads dominate.
constexpr uint64_t kMinChunkFloats = 1ull << 20;

MemoryPlan predict_memory(const std::vector<PlannedTensor>& tensors, uint64_t chunk_floats, uint64_t tile_n, int workers);

// The plan whose predicted peak is at most max_rss (0: no budget: `preferred` chunks on
// `workers` workers): the most workers, from `workers` down to 1, and for each the largest
// chunk size from `preferred` down by halves to kMinChunkFloats. The returned plan's
// peak_bytes exceeds max_rss when even one worker with the smallest chunk does not fit.
MemoryPlan fit_memory(const std::vector<PlannedTensor>& tensors, uint64_t preferred, uint64_t tile_n, int workers, uint64_t max_rss);

}  // namespace iris
