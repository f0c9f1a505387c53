#include "converter/producers.h"

#include <algorithm>
#include <vector>

#include "formats/tile_layout.h"

namespace iris {

namespace {
constexpr uint64_t kWindow = 64ull << 20;  // source bytes mapped in at once
}

ComponentProducer copy_producer(const MappedFile& file, uint64_t offset, uint64_t size) {
  return [&file, offset, size](ByteSink& sink) -> Status {
    for (uint64_t pos = 0; pos < size; pos += kWindow) {
      uint64_t n = std::min(kWindow, size - pos);
      file.will_need(offset + pos + n, std::min(kWindow, size - pos - n));
      IRIS_TRY(sink.write(file.bytes(offset + pos, n)));
      file.release(offset + pos, n);
    }
    return Status::ok();
  };
}

ComponentProducer tile_producer(const MappedFile& file, uint64_t offset, MatrixGeometry g, Layout layout) {
  return [&file, offset, g, layout](ByteSink& sink) -> Status {
    const uint64_t tn = layout.tile_n, tk = layout.tile_k;
    // Several stripes per write keep syscalls few while the buffer stays bounded.
    const uint64_t one = stripe_bytes(g, tn);
    const uint64_t per_batch = std::max<uint64_t>(1, kWindow / std::max<uint64_t>(one, 1));
    std::vector<uint8_t> buf;
    const uint64_t rows_bytes = g.n * g.row_bytes();
    for (uint64_t b = 0; b < g.batch; ++b) {
      const uint64_t base = offset + b * rows_bytes;
      for (uint64_t s0 = 0; s0 < g.padded_n; s0 += tn * per_batch) {
        const uint64_t s1 = std::min(g.padded_n, s0 + tn * per_batch);
        buf.resize((s1 - s0) / tn * one);
        for (uint64_t r = s0; r < s1; r += tn) {
          const uint8_t* rows = r < g.n ? file.data() + base + r * g.row_bytes() : nullptr;
          tile_stripe(g, tn, tk, rows, r, buf.data() + (r - s0) / tn * one);
        }
        IRIS_TRY(sink.write(buf));
        const uint64_t r_end = std::min(s1, g.n);
        if (s0 < r_end) file.release(base + s0 * g.row_bytes(), (r_end - s0) * g.row_bytes());
      }
    }
    return Status::ok();
  };
}

}  // namespace iris
