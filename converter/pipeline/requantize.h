// Requantization of one tensor: its source decoded in row chunks, re-encoded into the
// target format, the codes tiled and streamed into the archive while the side components
// (scales, absmax...) wait in a small stash for their turn. Memory stays at one chunk of
// FP32 values plus the side components, whatever the tensor's size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "converter/pipeline/quality.h"
#include "converter/pipeline/quant_policy.h"
#include "formats/byte_sink.h"
#include "formats/iris_writer.h"
#include "converter/sources/source_tensors.h"
#include "quant/mxfp4.h"

namespace iris {

class FusedAmax;  // converter/pipeline/requant/fused_amax.h

struct RequantOptions {
  uint64_t tile_n = kDefaultTileN, tile_k = kDefaultTileK;
  quant::Mxfp4ScaleRule mxfp4_rule = quant::Mxfp4ScaleRule::kOcpFloor;
  bool allow_nonfinite = false;
  // FP32 values decoded per chunk (rounded to whole stripes and 128-row blocks): the working
  // set is about 3 buffers of this many floats. 2M (8 MiB per buffer) converted a 2.7 GB BF16
  // snapshot 1.85-1.91x faster than 16M on the 2-core machine (single runs; command and
  // figures in docs/BENCHMARKS.md, issue 12). Tests make it small to cross chunk edges.
  uint64_t chunk_floats = 2ull << 20;
  // Chunks computed at once, one per worker thread, each wholly on one core and written in
  // order (converter/pipeline/requantize.cpp): 0 = one per core. Every worker holds its own chunk
  // buffers, which the memory plan counts.
  int workers = 0;
  // NVFP4: the amax behind each tensor's global scale, shared by the projections that read the
  // same input, as ModelOpt's export shares it (null: each tensor's own).
  std::shared_ptr<FusedAmax> nvfp4_amax;
};

// The workers `o` asks for: o.workers, or the OpenMP thread count when it is 0.
int requant_workers(const RequantOptions& o);

struct RequantPlan {
  TensorDesc desc;               // the target tensor
  nlohmann::json source_record;  // the checkpoint tensors export --dtype keep writes for it
  std::vector<ComponentProducer> producers;
  std::shared_ptr<QualityStats> quality;  // filled while the producers run
  LateDesc late;                          // NF4: the nested offset, known once the codes producer has run
};

// Rows per requantization chunk of a matrix with `k` columns whose tiles hold `tile_n` rows
// (1 untiled): whole stripes and whole 128-row FP8 blocks, about chunk_floats values.
uint64_t requant_chunk_rows(uint64_t tile_n, uint64_t k, uint64_t chunk_floats);

// Plans `source` -> `target` (not kKeep), reading no values. An NF4 target's nested offset
// (a manifest parameter) needs a pass over the values: its codes producer makes it before
// encoding, and `late` gives the final descriptor (a dry run's planned() makes the pass
// itself). No decoder or side component outlives its tensor's turn: memory is flat in the
// model size.
Result<RequantPlan> plan_requantize(const SourceTensor& source, Target target, const RequantOptions& options);

}  // namespace iris
