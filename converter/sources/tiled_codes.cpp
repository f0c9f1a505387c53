#include "converter/sources/tiled_codes.h"

#include <algorithm>
#include <cstring>

#include "common/checked_math.h"
#include "formats/tile_layout.h"

namespace iris {

Status read_tiled_codes(const SourcePart& part, uint64_t offset, uint64_t n, uint8_t* out, TiledScratch& scratch) {
  const std::string where = part.ref.file->path() + ": tensor '" + part.ref.tensor->name + "': ";
  if (!part.tiled) return internal_error(where + "its codes are not tiled");
  const MatrixGeometry& g = part.tiled->geometry;
  const uint64_t tn = part.tiled->layout.tile_n, tk = part.tiled->layout.tile_k;
  const uint64_t rb = g.row_bytes();
  if (tn == 0 || tk == 0 || g.padded_n % tn != 0 || g.padded_k % tk != 0)
    return invalid_input(where + "tiles of " + std::to_string(tn) + "x" + std::to_string(tk) + " do not divide the padded matrix");
  const uint64_t one = stripe_bytes(g, tn), per_matrix = g.padded_n / tn;
  const auto stored = checked_mul(checked_mul(g.batch, per_matrix).value_or(UINT64_MAX), one);
  if (!stored || *stored != part.ref.tensor->size)
    return invalid_input(where + "holds " + std::to_string(part.ref.tensor->size) + " bytes, not the tiled codes of its shape");
  const uint64_t total = g.batch * g.n * rb;
  if (offset > total || n > total - offset)
    return invalid_input(where + "bytes [" + std::to_string(offset) + ", +" + std::to_string(n) + ") are past its " +
                         std::to_string(total) + " bytes of codes");
  if (n == 0) return Status::ok();
  const MappedFile& file = part.ref.file->mapping();
  const uint64_t last_row = (offset + n - 1) / rb;
  scratch.rows.resize(tn * rb);
  for (uint64_t row = offset / rb; row <= last_row;) {
    const uint64_t b = row / g.n, r = row % g.n;
    const uint64_t r_end = std::min(g.n, r + (last_row - row) + 1);  // this matrix's rows, exclusive
    const uint64_t s0 = r / tn, s1 = (r_end - 1) / tn + 1;
    scratch.stripes.resize((s1 - s0) * one);
    IRIS_TRY(file.read_at(part.ref.tensor->offset + (b * per_matrix + s0) * one, scratch.stripes.data(), scratch.stripes.size()));
    for (uint64_t s = s0; s < s1; ++s) {
      const uint64_t row0 = s * tn, valid = std::min(tn, g.n - row0);
      untile_stripe(g, tn, tk, scratch.stripes.data() + (s - s0) * one, row0, scratch.rows.data());
      const uint64_t first = (b * g.n + row0) * rb;  // the stripe's first byte, row-major
      const uint64_t lo = std::max(offset, first), hi = std::min(offset + n, first + valid * rb);
      if (lo < hi) std::memcpy(out + (lo - offset), scratch.rows.data() + (lo - first), size_t(hi - lo));
    }
    row = b * g.n + r_end;
  }
  return Status::ok();
}

}  // namespace iris
