// Requantization to BF16 (a quantized source dequantized, or a wider float narrowed), rounded
// to nearest even, with the quality sums of the rounding.
#include "converter/pipeline/requant/chunk_engine.h"

#include "common/float_bits.h"

namespace iris::requant {

Status produce_bf16(Job& j, ByteSink& sink) {
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    auto* out = reinterpret_cast<uint16_t*>(w.codes.get(c.count * 2));
    IRIS_TRY(for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      uint16_t* po = out + (r0 - c.r0) * j.k;
      float* back = w.back.get(count);
      for (uint64_t i = 0; i < count; ++i) {
        po[i] = f32_to_bf16(x[i]);
        back[i] = bf16_to_f32(po[i]);
      }
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    w.out = {reinterpret_cast<const uint8_t*>(out), c.count * 2};
    return Status::ok();
  };
  return run_chunks(j, compute, [&](Worker& w, const Chunk&) { return write_chunk(j, w, sink); });
}

}  // namespace iris::requant
