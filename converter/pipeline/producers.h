// Component producers: the code that turns source bytes into archive bytes, one component
// at a time, touching only a bounded window of the source at once.
#pragma once

#include <functional>

#include "common/mapped_file.h"
#include "formats/byte_sink.h"
#include "formats/tensor_desc.h"

namespace iris {

// Copies [offset, offset + size) of a source file through two 1 MiB pread windows, the next
// read on a second thread while the current one is written (RSS stays flat).
ComponentProducer copy_producer(const MappedFile& file, uint64_t offset, uint64_t size);

// Tiles row-major codes (`batch` matrices of n rows of g.row_bytes()) starting at `offset`,
// reading a window of whole stripes at a time.
ComponentProducer tile_producer(const MappedFile& file, uint64_t offset, MatrixGeometry g, Layout layout);

// Reads bytes [at, at + n) of a tensor's row-major codes into out (from its start).
using RowBytesReader = std::function<Status(uint64_t at, uint64_t n, uint8_t* out)>;
// The same, the rows read through `read` (an archive source's tiled codes, untiled).
ComponentProducer tile_producer(RowBytesReader read, MatrixGeometry g, Layout layout);
// Writes the `total` bytes `read` gives, a window at a time (codes kept row-major).
ComponentProducer stream_producer(RowBytesReader read, uint64_t total);

}  // namespace iris
