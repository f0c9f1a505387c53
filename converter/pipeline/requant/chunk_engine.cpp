#include "converter/pipeline/requant/chunk_engine.h"

#include <cstdio>

#include "common/float_bits.h"
#include "formats/tile_layout.h"
#include "quant/nonfinite.h"

namespace iris::requant {

std::vector<std::unique_ptr<Worker>>& worker_pool(int n) {
  static std::vector<std::unique_ptr<Worker>> pool;
  while (int(pool.size()) < n) pool.push_back(std::make_unique<Worker>());
  return pool;
}

Status ensure_decoder(Job& j) {
  if (j.decoder) return Status::ok();
  IRIS_ASSIGN_OR_RETURN(j.decoder, SourceDecoder::create(j.source));
  return Status::ok();
}

namespace {

// The error for `bad` non-finite values among elements [first_index, first_index + count),
// the first of them element `at`, of value v.
Status nonfinite_error(const Job& j, uint64_t bad, uint64_t first_index, uint64_t count, uint64_t at, float v) {
  char val[32];
  std::snprintf(val, sizeof val, "%g", double(v));
  return invalid_input("tensor '" + j.source.desc.name + "': " + std::to_string(bad) + " non-finite value(s) in elements [" +
                       std::to_string(first_index) + ", " + std::to_string(first_index + count) + "), the first at index " +
                       std::to_string(first_index + at) + " (" + val + "); refusing to quantize (--allow-nonfinite to override)");
}

}  // namespace

Status check_finite(const Job& j, const float* v, uint64_t count, uint64_t first_index) {
  if (j.opts.allow_nonfinite) return Status::ok();
  uint64_t first = 0;
  const uint64_t bad = quant::count_nonfinite(v, count, &first);  // vectorised (quant/simd.h)
  return bad ? nonfinite_error(j, bad, first_index, count, first, v[first]) : Status::ok();
}

Status check_finite(const Job& j, const uint16_t* bf16, uint64_t count, uint64_t first_index) {
  if (j.opts.allow_nonfinite) return Status::ok();
  uint64_t first = 0;
  const uint64_t bad = quant::count_nonfinite_bf16(bf16, count, &first);
  return bad ? nonfinite_error(j, bad, first_index, count, first, bf16_to_f32(bf16[first])) : Status::ok();
}

uint64_t chunk_rows(const Job& j) {
  return requant_chunk_rows(j.desc.layout.kind == LayoutKind::kTiled ? j.desc.layout.tile_n : 1, j.k, j.opts.chunk_floats);
}

int worker_count(const Job& j, uint64_t chunks) { return int(std::clamp<uint64_t>(chunks, 1, uint64_t(requant_workers(j.opts)))); }

Result<const float*> decode_piece(const Job& j, Worker& w, const Chunk& c, uint64_t r0, uint64_t r1, uint64_t count) {
  const uint64_t row0 = c.m * j.n + r0;
  float* x = w.x.get(count);
  IRIS_TRY(j.decoder->decode_rows(row0, c.m * j.n + r1, x, w.decode));
  IRIS_TRY(check_finite(j, x, count, row0 * j.k));
  return static_cast<const float*>(x);
}

void tile_rows(const Job& j, Worker& w, const uint8_t* rows, uint64_t r0, uint64_t r1) {
  const MatrixGeometry g = matrix_geometry(j.desc).value();
  const uint64_t tn = j.desc.layout.tile_n;
  const uint64_t end = r1 == j.n ? g.padded_n : r1;  // the last chunk also writes the padding stripes' rows
  const uint64_t bytes = (end - r0) / tn * stripe_bytes(g, tn);
  uint8_t* tiled = w.tiled.get(bytes);
  for (uint64_t r = r0; r < end; r += tn)
    tile_stripe(g, tn, j.desc.layout.tile_k, r < j.n ? rows + (r - r0) * g.row_bytes() : nullptr, r, tiled + (r - r0) / tn * stripe_bytes(g, tn));
  w.out = {tiled, bytes};
}

Status write_chunk(Job& j, Worker& w, ByteSink& sink) {
  j.quality->merge(w.quality);
  w.quality = QualityStats();
  return sink.write(w.out);
}

}  // namespace iris::requant
