// Row-major codes out of an archive source's tiled codes (formats/tile_layout.h): what a
// requantizing decoder and a re-tiling copy read, in the checkpoint's byte order.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "converter/sources/source_tensors.h"

namespace iris {

// A reader's buffers, reused across calls (one per thread).
struct TiledScratch {
  std::vector<uint8_t> stripes, rows;
};

// Bytes [offset, offset + n) of the row-major codes (batch matrices of n rows of
// geometry.row_bytes()) that `part` holds tiled: the stripes that hold them read at once, then
// untiled. kInvalidInput naming the tensor when the range or the stored size does not fit.
Status read_tiled_codes(const SourcePart& part, uint64_t offset, uint64_t n, uint8_t* out, TiledScratch& scratch);

}  // namespace iris
