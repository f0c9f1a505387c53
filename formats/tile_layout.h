// The byte permutation between row-major codes and the archive's tiled codes.
//
// Row-major input: `batch` matrices of n rows, each row_bytes() wide (the source packing).
// Tiled output: per matrix, per stripe of tile_n rows, per tile along K, tile_n rows of
// tile_k elements. Padding rows/columns are filled with geometry.pad_byte.
#pragma once

#include <cstdint>
#include <span>

#include "formats/tensor_desc.h"

namespace iris {

// Bytes of one tiled stripe (tile_n rows across the whole padded K).
uint64_t stripe_bytes(const MatrixGeometry& g, uint64_t tile_n);
// Byte offset of tiled element (matrix b, row r, column c), c a multiple of the packing unit.
uint64_t tiled_byte_offset(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, uint64_t b, uint64_t r,
                           uint64_t c);

// Tiles the stripe whose first row is `row0` of one matrix. `rows` points at that row in
// row-major form and holds min(tile_n, n - row0) rows. `out` receives stripe_bytes().
void tile_stripe(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, const uint8_t* rows, uint64_t row0,
                 uint8_t* out);
// The inverse: writes min(tile_n, n - row0) row-major rows from one tiled stripe.
void untile_stripe(const MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, const uint8_t* stripe, uint64_t row0,
                   uint8_t* rows);

}  // namespace iris
