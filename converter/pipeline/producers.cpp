#include "converter/pipeline/producers.h"

#include <algorithm>
#include <vector>

#include "formats/tile_layout.h"

namespace iris {

namespace {
// Bytes read from the source at once, large enough for few syscalls. 1 MiB rather than 16:
// a lossless convert took 0.79x the wall time and 0.75x the CPU (docs/BENCHMARKS.md, issue
// 12), presumably because the window stays in cache between the read, the hash and the copy
// into the writer's buffers. (Reading the next window on a second thread, std::async per
// window, was slower: 1.17x the wall time and 1.6x the CPU of this loop, five pairs.)
constexpr uint64_t kWindow = 1ull << 20;
// The kernel is asked to read kAhead past the window being read (an asynchronous readahead):
// the next windows' preads find their pages in the cache, and the disk works while this
// thread hashes and writes. Each step asks for one window more, at that distance.
constexpr uint64_t kAhead = MappedFile::kReadAhead;
}

ComponentProducer copy_producer(const MappedFile& file, uint64_t offset, uint64_t size) {
  return [&file, offset, size](ByteSink& sink) -> Status {
    std::vector<uint8_t> buf;
    file.will_need(offset, std::min(size, kAhead));
    for (uint64_t pos = 0; pos < size;) {
      const uint64_t n = std::min(kWindow, size - pos);
      if (pos + kAhead < size) file.will_need(offset + pos + kAhead, std::min(n, size - pos - kAhead));
      // Straight into the sink's buffer where it has one (the archive writer's): one copy
      // fewer for every byte carried over.
      const std::span<uint8_t> room = sink.room(n);
      if (!room.empty()) {
        IRIS_TRY(file.read_at(offset + pos, room.data(), room.size()));
        IRIS_TRY(sink.commit(room));
        pos += room.size();
        continue;
      }
      buf.resize(n);
      IRIS_TRY(file.read_at(offset + pos, buf.data(), n));
      IRIS_TRY(sink.write({buf.data(), n}));
      pos += n;
    }
    return Status::ok();
  };
}

ComponentProducer tile_producer(const MappedFile& file, uint64_t offset, MatrixGeometry g, Layout layout) {
  const uint64_t total = g.batch * g.n * g.row_bytes();
  file.will_need(offset, std::min(total, kAhead));
  RowBytesReader read = [&file, offset, total](uint64_t at, uint64_t n, uint8_t* out) -> Status {
    if (at + kAhead < total) file.will_need(offset + at + kAhead, std::min<uint64_t>(n, total - at - kAhead));
    return file.read_at(offset + at, out, n);
  };
  return tile_producer(std::move(read), g, layout);
}

ComponentProducer tile_producer(RowBytesReader read, MatrixGeometry g, Layout layout) {
  return [read = std::move(read), g, layout](ByteSink& sink) -> Status {
    const uint64_t tn = layout.tile_n, tk = layout.tile_k;
    // Several stripes per read/write keep syscalls few while the buffers stay bounded.
    const uint64_t one = stripe_bytes(g, tn);
    const uint64_t stripes = std::max<uint64_t>(1, kWindow / std::max<uint64_t>(one, 1));
    std::vector<uint8_t> rows, tiled;
    const uint64_t matrix_bytes = g.n * g.row_bytes();
    for (uint64_t b = 0; b < g.batch; ++b) {
      for (uint64_t s0 = 0; s0 < g.padded_n; s0 += tn * stripes) {
        const uint64_t s1 = std::min(g.padded_n, s0 + tn * stripes);
        const uint64_t r_end = std::min(s1, g.n);
        const uint64_t nrows = s0 < r_end ? r_end - s0 : 0;
        rows.resize(nrows * g.row_bytes());
        if (nrows) IRIS_TRY(read(b * matrix_bytes + s0 * g.row_bytes(), rows.size(), rows.data()));  // from the tensor's start
        tiled.resize((s1 - s0) / tn * one);
        for (uint64_t r = s0; r < s1; r += tn) {
          const uint8_t* src = r < g.n ? rows.data() + (r - s0) * g.row_bytes() : nullptr;
          tile_stripe(g, tn, tk, src, r, tiled.data() + (r - s0) / tn * one);
        }
        IRIS_TRY(sink.write(tiled));
      }
    }
    return Status::ok();
  };
}

ComponentProducer stream_producer(RowBytesReader read, uint64_t total) {
  return [read = std::move(read), total](ByteSink& sink) -> Status {
    std::vector<uint8_t> buf;
    for (uint64_t pos = 0; pos < total;) {
      const uint64_t n = std::min(kWindow, total - pos);
      buf.resize(n);
      IRIS_TRY(read(pos, n, buf.data()));
      IRIS_TRY(sink.write({buf.data(), n}));
      pos += n;
    }
    return Status::ok();
  };
}

}  // namespace iris
