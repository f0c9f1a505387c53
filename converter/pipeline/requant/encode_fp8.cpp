// Requantization to FP8 E4M3, per tensor (an amax pass first), per channel or per 128x128
// block (the scales are each piece's own).
#include "converter/pipeline/requant/chunk_engine.h"

#include <cmath>
#include <type_traits>

#include "quant/fp8.h"

namespace iris::requant {

Status produce_fp8(Job& j, ByteSink& sink) {
  j.stash.fp8_scales.clear();
  const quant::Fp8Granularity g = j.target == Target::kFp8Tensor ? quant::Fp8Granularity::kTensor
                                  : j.target == Target::kFp8Channel ? quant::Fp8Granularity::kChannel
                                                                     : quant::Fp8Granularity::kBlock;
  // Per tensor: the amax of each matrix first, then one multiplier for all its chunks.
  std::vector<float> mul(j.batch, 1.f);
  if (g == quant::Fp8Granularity::kTensor) {
    std::vector<float> amax(j.batch, 0.f);
    auto chunk_amax = [&](Worker& w, Chunk& c) -> Status {
      w.amax = 0.f;
      return for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t, uint64_t, uint64_t count) -> Status {
        float a = w.amax;
        for (uint64_t i = 0; i < count; ++i) a = std::max(a, std::fabs(x[i]));  // NaN refused earlier
        w.amax = a;
        return Status::ok();
      });
    };
    auto merge_amax = [&](Worker& w, const Chunk& c) -> Status {
      amax[c.m] = std::max(amax[c.m], w.amax);
      return Status::ok();
    };
    IRIS_TRY(run_chunks(j, chunk_amax, merge_amax));
    for (uint64_t m = 0; m < j.batch; ++m) {
      mul[m] = quant::fp8_multiplier(amax[m]);  // the encoders' own rule (torch's 448 * (1/amax))
      j.stash.fp8_scales.push_back(1.f / mul[m]);
    }
  }
  // Block scales span 128 rows: block pieces are whole 128-row blocks (chunks are, too).
  const uint64_t piece_multiple = g == quant::Fp8Granularity::kBlock ? 128 : 1;
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    uint8_t* codes = w.codes.get(c.count);
    w.scalesf.clear();
    if (g != quant::Fp8Granularity::kTensor) {
      // Per channel or block: the scales are the piece's own (whole 128-row bands).
      IRIS_TRY(for_each_piece_rows(j, c, piece_multiple, kPieceFloats, [&](uint64_t r0, uint64_t r1, uint64_t) -> Status {
        uint8_t* pc = codes + (r0 - c.r0) * j.k;
        const size_t s0 = w.scalesf.size();
        w.scalesf.resize(s0 + quant::fp8_scale_count(1, r1 - r0, j.k, g, 128, 128));
        float* ps = w.scalesf.data() + s0;
        return encode_piece_in_one_pass(j, w, c.m * j.n + r0, c.m * j.n + r1, [&](const auto* v) {
          if constexpr (std::is_same_v<decltype(v), const uint16_t*>)
            return quant::fp8_encode_sums_bf16(v, r1 - r0, j.k, g, 128, 128, pc, ps, &w.quality);
          else
            return quant::fp8_encode_sums(v, r1 - r0, j.k, g, 128, 128, pc, ps, &w.quality);
        });
      }));
      tile_rows(j, w, codes, c.r0, c.r1);
      return Status::ok();
    }
    IRIS_TRY(for_each_piece(j, w, c, piece_multiple, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      uint8_t* pc = codes + (r0 - c.r0) * j.k;
      float* back = w.back.get(count);  // the decoded values, written with the codes
      quant::fp8_encode_unit(x, count, mul[c.m], pc, back);
      w.scalesf.push_back(j.stash.fp8_scales[c.m]);
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    tile_rows(j, w, codes, c.r0, c.r1);
    return Status::ok();
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    if (g != quant::Fp8Granularity::kTensor) j.stash.fp8_scales.insert(j.stash.fp8_scales.end(), w.scalesf.begin(), w.scalesf.end());
    return write_chunk(j, w, sink);
  };
  return run_chunks(j, compute, emit);
}

}  // namespace iris::requant
