#include "converter/sources/tiled_codes.h"

#include <algorithm>
#include <cstring>

#include "common/checked_math.h"
#include "formats/tile_layout.h"

namespace iris {

Status read_tiled_codes(const SourcePart& part, uint64_t offset, uint64_t n, uint8_t* out, TiledScratch& scratch) {
  // (Built only for an error: this runs once a decoded piece.)
  auto where = [&] { return part.ref.file->path() + ": tensor '" + part.ref.tensor->name + "': "; };
  if (!part.tiled) return internal_error(where() + "its codes are not tiled");
  const MatrixGeometry& g = part.tiled->geometry;
  const uint64_t tn = part.tiled->layout.tile_n, tk = part.tiled->layout.tile_k;
  const uint64_t rb = g.row_bytes();
  if (tn == 0 || tk == 0 || g.padded_n % tn != 0 || g.padded_k % tk != 0)
    return invalid_input(where() + "tiles of " + std::to_string(tn) + "x" + std::to_string(tk) + " do not divide the padded matrix");
  const uint64_t one = stripe_bytes(g, tn), per_matrix = g.padded_n / tn;
  const auto stored = checked_mul(checked_mul(g.batch, per_matrix).value_or(UINT64_MAX), one);
  if (!stored || *stored != part.ref.tensor->size)
    return invalid_input(where() + "holds " + std::to_string(part.ref.tensor->size) + " bytes, not the tiled codes of its shape");
  const uint64_t total = g.batch * g.n * rb;
  if (offset > total || n > total - offset)
    return invalid_input(where() + "bytes [" + std::to_string(offset) + ", +" + std::to_string(n) + ") are past its " +
                         std::to_string(total) + " bytes of codes");
  if (n == 0) return Status::ok();
  const MappedFile& file = part.ref.file->mapping();
  const uint64_t tile_row_bytes = tk * g.code_bits / 8, tiles = g.padded_k / tk;
  const uint64_t last_row = (offset + n - 1) / rb;
  // The bytes of row `row` (of matrix b), columns [col_byte, col_byte + take), into out where
  // they fall inside [offset, offset + n).
  auto place = [&](uint64_t b, uint64_t row, uint64_t col_byte, const uint8_t* bytes, uint64_t take) {
    const uint64_t first = (b * g.n + row) * rb + col_byte;
    const uint64_t lo = std::max(offset, first), hi = std::min(offset + n, first + take);
    if (lo < hi) std::memcpy(out + (lo - offset), bytes + (lo - first), size_t(hi - lo));
  };
  for (uint64_t row = offset / rb; row <= last_row;) {
    const uint64_t b = row / g.n, r = row % g.n;
    const uint64_t r_end = std::min(g.n, r + (last_row - row) + 1);  // this matrix's rows, exclusive
    for (uint64_t s = r / tn; s * tn < r_end; ++s) {
      const uint64_t row0 = s * tn, valid = std::min(tn, g.n - row0);
      const uint64_t lo_row = std::max(r, row0), hi_row = std::min(r_end, row0 + valid);
      const uint64_t at = part.ref.tensor->offset + (b * per_matrix + s) * one;
      if ((hi_row - lo_row) * 2 >= valid) {
        // Most of the stripe: read whole and untiled.
        scratch.stripes.resize(one);
        scratch.rows.resize(valid * rb);
        IRIS_TRY(file.read_at(at, scratch.stripes.data(), one));
        untile_stripe(g, tn, tk, scratch.stripes.data(), row0, scratch.rows.data());
        for (uint64_t x = lo_row; x < hi_row; ++x) place(b, x, 0, scratch.rows.data() + (x - row0) * rb, rb);
        continue;
      }
      // A few rows of a tall stripe (a piece of a requantizing chunk): from each tile along K,
      // just their bytes, which lie together (tile_n rows of tile_row_bytes each).
      const uint64_t rows_wanted = hi_row - lo_row;
      scratch.stripes.resize(rows_wanted * tile_row_bytes);
      for (uint64_t t = 0; t < tiles && t * tile_row_bytes < rb; ++t) {
        IRIS_TRY(file.read_at(at + t * tn * tile_row_bytes + (lo_row - row0) * tile_row_bytes, scratch.stripes.data(), scratch.stripes.size()));
        const uint64_t take = std::min(tile_row_bytes, rb - t * tile_row_bytes);
        for (uint64_t x = lo_row; x < hi_row; ++x) place(b, x, t * tile_row_bytes, scratch.stripes.data() + (x - lo_row) * tile_row_bytes, take);
      }
    }
    row = b * g.n + r_end;
  }
  return Status::ok();
}

}  // namespace iris
