// Requantization to NVFP4 with ModelOpt's arithmetic (quant/nvfp4.h): the global scale of each
// matrix from its amax (shared with its fused siblings: requant/fused_amax.h), then each
// chunk's rows encoded with their E4M3 block scales and their error sums.
#include "converter/pipeline/requant/chunk_engine.h"

#include <cmath>

#include "common/checked_math.h"
#include "converter/pipeline/requant/fused_amax.h"
#include "quant/nvfp4.h"

namespace iris::requant {

Status produce_nvfp4(Job& j, ByteSink& sink) {
  const uint64_t blocks = ceil_div(j.k, 16), row_bytes = blocks * 8;
  j.stash.nvfp4_scales.clear();
  j.stash.nvfp4_tensor_scales.clear();
  std::vector<float> amax;
  if (j.opts.nvfp4_amax) {
    IRIS_ASSIGN_OR_RETURN(amax, j.opts.nvfp4_amax->amax(j.desc.name));
  } else {
    FusedAmax alone;
    alone.add(&j.source);
    IRIS_ASSIGN_OR_RETURN(amax, alone.amax(j.desc.name));
  }
  if (amax.size() != j.batch) return internal_error("tensor '" + j.desc.name + "': amax of the wrong count");
  for (float a : amax) j.stash.nvfp4_tensor_scales.push_back(quant::nvfp4_tensor_scale(a));
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    uint8_t* codes = w.codes.get((c.r1 - c.r0) * row_bytes);
    w.scales8.resize((c.r1 - c.r0) * blocks);
    const float t = j.stash.nvfp4_tensor_scales[c.m];
    IRIS_TRY(for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t r1, uint64_t count) -> Status {
      float* back = w.back.get(count);
      quant::nvfp4_encode_rows(x, r1 - r0, j.k, t, codes + (r0 - c.r0) * row_bytes, w.scales8.data() + (r0 - c.r0) * blocks, back);
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    tile_rows(j, w, codes, c.r0, c.r1);
    return Status::ok();
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    j.stash.nvfp4_scales.insert(j.stash.nvfp4_scales.end(), w.scales8.begin(), w.scales8.end());
    return write_chunk(j, w, sink);
  };
  return run_chunks(j, compute, emit);
}

}  // namespace iris::requant
