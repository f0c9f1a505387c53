// Requantization to MXFP4: each chunk's rows encoded with their error sums in one pass, the
// E8M0 scales kept in the stash in chunk order for the scales component.
#include "converter/pipeline/requant/chunk_engine.h"

#include <type_traits>

#include "common/checked_math.h"
#include "quant/mxfp4.h"

namespace iris::requant {

Status produce_mxfp4(Job& j, ByteSink& sink) {
  const uint64_t blocks = ceil_div(j.k, 32);
  j.stash.mxfp4_scales.clear();
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    uint8_t* codes = w.codes.get((c.r1 - c.r0) * blocks * 16);
    w.scales8.resize((c.r1 - c.r0) * blocks);
    IRIS_TRY(for_each_piece_rows(j, c, 1, kPieceFloats, [&](uint64_t r0, uint64_t r1, uint64_t) -> Status {
      uint8_t* pc = codes + (r0 - c.r0) * blocks * 16;
      uint8_t* ps = w.scales8.data() + (r0 - c.r0) * blocks;
      return encode_piece_in_one_pass(j, w, c.m * j.n + r0, c.m * j.n + r1, [&](const auto* v) {
        if constexpr (std::is_same_v<decltype(v), const uint16_t*>)
          return quant::mxfp4_encode_sums_bf16(v, r1 - r0, j.k, j.opts.mxfp4_rule, pc, ps, &w.quality);
        else
          return quant::mxfp4_encode_sums(v, r1 - r0, j.k, j.opts.mxfp4_rule, pc, ps, &w.quality);
      });
    }));
    tile_rows(j, w, codes, c.r0, c.r1);
    return Status::ok();
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    j.stash.mxfp4_scales.insert(j.stash.mxfp4_scales.end(), w.scales8.begin(), w.scales8.end());
    return write_chunk(j, w, sink);
  };
  return run_chunks(j, compute, emit);
}

}  // namespace iris::requant
