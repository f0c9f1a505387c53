#include "formats/tile_layout.h"

#include <algorithm>
#include <cstring>

namespace iris {

uint64_t stripe_bytes(const MatrixGeometry& g, uint64_t tile_n) { return tile_n * g.padded_row_bytes(); }

uint64_t tiled_byte_offset(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, uint64_t b, uint64_t r,
                           uint64_t c) {
  const uint64_t tile_row_bytes = tile_k * g.code_bits / 8;
  const uint64_t matrix_bytes = g.padded_n * g.padded_row_bytes();
  return b * matrix_bytes + (r / tile_n) * stripe_bytes(g, tile_n) + (c / tile_k) * tile_n * tile_row_bytes +
         (r % tile_n) * tile_row_bytes + (c % tile_k) * g.code_bits / 8;
}

void tile_stripe(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, const uint8_t* rows, uint64_t row0,
                 uint8_t* out) {
  const uint64_t tile_row_bytes = tile_k * g.code_bits / 8;
  const uint64_t src_row = g.row_bytes();
  const uint64_t valid_rows = row0 < g.n ? std::min(tile_n, g.n - row0) : 0;
  const uint64_t tiles = g.padded_k / tile_k;
  for (uint64_t t = 0; t < tiles; ++t) {
    const uint64_t col_byte = t * tile_row_bytes;
    const uint64_t take = col_byte < src_row ? std::min(tile_row_bytes, src_row - col_byte) : 0;
    uint8_t* tile = out + t * tile_n * tile_row_bytes;
    for (uint64_t r = 0; r < tile_n; ++r) {
      uint8_t* dst = tile + r * tile_row_bytes;
      if (r < valid_rows) {
        std::memcpy(dst, rows + r * src_row + col_byte, take);
        std::memset(dst + take, g.pad_byte, tile_row_bytes - take);
      } else {
        std::memset(dst, g.pad_byte, tile_row_bytes);
      }
    }
  }
}

void untile_stripe(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, const uint8_t* stripe, uint64_t row0,
                   uint8_t* rows) {
  const uint64_t tile_row_bytes = tile_k * g.code_bits / 8;
  const uint64_t src_row = g.row_bytes();
  const uint64_t valid_rows = row0 < g.n ? std::min(tile_n, g.n - row0) : 0;
  const uint64_t tiles = g.padded_k / tile_k;
  for (uint64_t t = 0; t < tiles; ++t) {
    const uint64_t col_byte = t * tile_row_bytes;
    if (col_byte >= src_row) break;
    const uint64_t take = std::min(tile_row_bytes, src_row - col_byte);
    const uint8_t* tile = stripe + t * tile_n * tile_row_bytes;
    for (uint64_t r = 0; r < valid_rows; ++r) std::memcpy(rows + r * src_row + col_byte, tile + r * tile_row_bytes, take);
  }
}

}  // namespace iris
