// Requantization to an unquantized float type (a quantized source dequantized, or a wider float
// narrowed): BF16 or F16 rounded to nearest even, F32 as decoded, with the quality sums of the
// rounding. The job's descriptor says which.
#include "converter/pipeline/requant/chunk_engine.h"

#include <cstring>

#include "common/float_bits.h"

namespace iris::requant {

Status produce_float(Job& j, ByteSink& sink) {
  const DType dt = j.desc.dtype;
  if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32)
    return internal_error("tensor '" + j.desc.name + "': no float encoder for " + std::string(dtype_archive_name(dt)));
  const uint64_t es = dtype_bits(dt) / 8;
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    auto* out = w.codes.get(c.count * es);
    IRIS_TRY(for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      uint8_t* po = out + (r0 - c.r0) * j.k * es;
      float* back = w.back.get(count);
      if (dt == DType::kF32) {
        std::memcpy(po, x, count * 4);
        std::memcpy(back, x, count * 4);
      } else {
        auto* h = reinterpret_cast<uint16_t*>(po);
        for (uint64_t i = 0; i < count; ++i) {
          h[i] = dt == DType::kBF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
          back[i] = dt == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
        }
      }
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    w.out = {reinterpret_cast<const uint8_t*>(out), c.count * es};
    return Status::ok();
  };
  return run_chunks(j, compute, [&](Worker& w, const Chunk&) { return write_chunk(j, w, sink); });
}

}  // namespace iris::requant
