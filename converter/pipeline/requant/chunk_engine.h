// The chunk engine of requantization (converter/pipeline/requantize.h): a tensor in chunks of whole
// stripes, each decoded, checked, encoded and summed by one worker while earlier chunks are
// written in order. Internal to the requantizer: each target's encoder (pipeline/requant/encode_*.cpp)
// is a compute and an emit step over it.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/parallel_for.h"
#include "converter/pipeline/requantize.h"
#include "converter/sources/source_decoder.h"
#include "formats/byte_sink.h"
#include "quant/nf4.h"

namespace iris::requant {

// Side components produced while the codes stream, written by the later producers.
struct Stash {
  std::vector<uint8_t> mxfp4_scales;
  std::vector<float> fp8_scales;
  std::vector<uint8_t> nvfp4_scales;        // E4M3, row-major
  std::vector<float> nvfp4_tensor_scales;   // one a matrix
  quant::Nf4DoubleQuant nf4;
  std::string quant_state;
};

struct Job {
  SourceTensor source;
  TensorDesc desc;
  Target target;
  RequantOptions opts;
  std::unique_ptr<SourceDecoder> decoder;  // made when the tensor's turn comes, dropped after it
  bool nf4_offset_known = false;           // NF4: the offset pass has run (ensure_nf4_offset)
  float nf4_offset = 0.f;                  // NF4: the nested offset (the manifest holds it)
  double nf4_absmax_sum = 0;               // NF4: the sum behind it, checked when writing
  uint64_t batch = 1, n = 1, k = 1;
  Stash stash;
  std::shared_ptr<QualityStats> quality = std::make_shared<QualityStats>();
};

// Scratch reused by every chunk of every tensor (tensors are written one at a time).
// Allocating per chunk or per tensor was most of the run time: zero fills and page faults.
// new T[n] leaves the memory uninitialised; it is always written before it is read.
template <typename T>
class Scratch {
 public:
  T* get(uint64_t n) {
    if (n > cap_) {
      buf_.reset(new T[n]);
      cap_ = n;
    }
    return buf_.get();
  }
  T* data() const { return buf_.get(); }  // what the last get() returned

 private:
  std::unique_ptr<T[]> buf_;
  uint64_t cap_ = 0;
};

// Rows [r0, r1) of matrix m: count values.
struct Chunk {
  uint64_t m = 0, r0 = 0, r1 = 0, count = 0;
};

// What one worker turns a chunk into, kept until the chunk's turn to be written: the bytes,
// the chunk's side values and its quality sums. Each chunk is computed wholly by one worker
// (decode, checks, encode, decode-back, sums, tiling), so workers share nothing mutable.
struct Worker {
  Scratch<float> x, back;
  Scratch<uint8_t> codes, tiled;
  DecodeScratch decode;
  std::span<const uint8_t> out;   // what the chunk writes
  QualityStats quality;           // the chunk's sums
  std::vector<uint8_t> scales8;   // MXFP4 scales of the chunk
  std::vector<float> scalesf;     // FP8 scales; the NF4 offset pass's block absmax
  float amax = 0;                 // FP8 tensor granularity: the chunk's amax
  std::vector<float> head, tail, pending;  // NF4: values kept past their piece (produce_nf4)
};

// One worker per thread of the chunk loop, reused across tensors.
std::vector<std::unique_ptr<Worker>>& worker_pool(int n);

Status ensure_decoder(Job& j);
// Non-finite values among elements [first_index, first_index + count) refused (unless
// --allow-nonfinite), the first named. Serial: it runs inside a worker, one chunk per core.
Status check_finite(const Job& j, const float* v, uint64_t count, uint64_t first_index);
Status check_finite(const Job& j, const uint16_t* bf16, uint64_t count, uint64_t first_index);
uint64_t chunk_rows(const Job& j);
int worker_count(const Job& j, uint64_t chunks);

// Every chunk of the job, several at once: `compute(worker, chunk)` runs on one worker per
// chunk, all workers in parallel (inside a worker the codecs' own OpenMP loops are nested and
// so serial), and `emit(worker, chunk)` runs on each
// chunk in chunk order, one at a time, while the other workers compute. So reading, encoding
// and writing overlap, and everything emit does (the stash, the quality merge, the archive's
// bytes) happens in the same order whatever the worker count: the same archive and the same
// report bits. The first error in chunk order is returned; later chunks are skipped.
template <typename Compute, typename Emit>
Status run_chunks(Job& j, Compute&& compute, Emit&& emit) {
  IRIS_TRY(ensure_decoder(j));
  const uint64_t step = chunk_rows(j);
  std::vector<Chunk> chunks;
  for (uint64_t m = 0; m < j.batch; ++m)
    for (uint64_t r0 = 0; r0 < j.n; r0 += step) {
      const uint64_t r1 = std::min(j.n, r0 + step);
      chunks.push_back({m, r0, r1, (r1 - r0) * j.k});
    }
  const int workers = worker_count(j, chunks.size());
  auto& pool = worker_pool(workers);
  std::atomic<bool> failed{false};
  Status first_error;
#pragma omp parallel for schedule(static, 1) ordered num_threads(workers)
  for (int64_t c = 0; c < int64_t(chunks.size()); ++c) {
    Worker& w = *pool[omp_get_thread_num()];
    // With several workers each one's codec loops stay on its thread (common/parallel_for.h);
    // a lone worker lets them use every core.
    ThreadLimit codec_threads(workers > 1 ? 1 : 0);
    Chunk ch = chunks[c];
    Status st;
    if (!failed.load(std::memory_order_relaxed)) st = compute(w, ch);
#pragma omp ordered
    {
      if (!failed.load(std::memory_order_relaxed)) {
        if (st.is_ok()) st = emit(w, ch);
        if (!st.is_ok()) {
          first_error = st;
          failed.store(true, std::memory_order_relaxed);
        }
      }
    }
  }
  return first_error;
}

// Values per piece: the rows of a chunk are decoded, checked, encoded, decoded back and summed
// a piece at a time, each pass finding the piece in cache, and a worker's FP32 buffers stay at
// a piece. Measured (docs/BENCHMARKS.md, issue 12): peak RSS 89.8 -> 39.6 MiB with two
// workers (mxfp4, 1.83 GB BF16); the time moved within noise (0.98x -> 0.96x of the previous
// binary's wall time).
constexpr uint64_t kPieceFloats = uint64_t(64) << 10;

// Rows [c.r0, c.r1) of the chunk in pieces of a multiple of `row_multiple` rows, about
// max_floats values each, handed to fn(r0, r1, count) (rows of matrix c.m).
template <typename F>
Status for_each_piece_rows(const Job& j, const Chunk& c, uint64_t row_multiple, uint64_t max_floats, F&& fn) {
  const uint64_t piece_rows = std::max<uint64_t>(row_multiple, max_floats / std::max<uint64_t>(j.k, 1) / row_multiple * row_multiple);
  for (uint64_t r0 = c.r0; r0 < c.r1; r0 += piece_rows) {
    const uint64_t r1 = std::min(c.r1, r0 + piece_rows);
    IRIS_TRY(fn(r0, r1, (r1 - r0) * j.k));
  }
  return Status::ok();
}

// Rows [r0, r1) of matrix c.m decoded into the worker's buffer and checked for non-finite
// values.
Result<const float*> decode_piece(const Job& j, Worker& w, const Chunk& c, uint64_t r0, uint64_t r1, uint64_t count);

// The same, each piece decoded (decode_piece) and handed to fn(x, r0, r1, count).
template <typename F>
Status for_each_piece(const Job& j, Worker& w, const Chunk& c, uint64_t row_multiple, uint64_t max_floats, F&& fn) {
  return for_each_piece_rows(j, c, row_multiple, max_floats, [&](uint64_t r0, uint64_t r1, uint64_t count) -> Status {
    IRIS_ASSIGN_OR_RETURN(const float* x, decode_piece(j, w, c, r0, r1, count));
    return fn(x, r0, r1, count);
  });
}

// Rows [row0, row1) encoded with their error sums in one pass by `encode`, called with the
// rows' values: a BF16 source's bit patterns as they are (const uint16_t*), any other source
// decoded into the worker's FP32 buffer (const float*). `encode` returns how many NaN/Inf it
// met (quant's *_encode_sums); only then are the values searched for the first, for the error.
template <typename Encode>
Status encode_piece_in_one_pass(const Job& j, Worker& w, uint64_t row0, uint64_t row1, Encode&& encode) {
  const uint64_t count = (row1 - row0) * j.k;
  IRIS_ASSIGN_OR_RETURN(const uint16_t* bf16, j.decoder->raw_bf16_rows(row0, row1, w.decode));
  if (bf16) {
    if (encode(bf16)) IRIS_TRY(check_finite(j, bf16, count, row0 * j.k));
  } else {
    float* x = w.x.get(count);
    IRIS_TRY(j.decoder->decode_rows(row0, row1, x, w.decode));
    if (encode(static_cast<const float*>(x))) IRIS_TRY(check_finite(j, x, count, row0 * j.k));
  }
  w.quality.count += count;
  return Status::ok();
}

// Tiles `rows` (r1 - r0 rows of row-major codes, r0 a stripe boundary) into the worker's
// buffer and returns them as the chunk's output.
void tile_rows(const Job& j, Worker& w, const uint8_t* rows, uint64_t r0, uint64_t r1);
// The emit step common to every target: the chunk's sums merged and its bytes written.
Status write_chunk(Job& j, Worker& w, ByteSink& sink);

// The targets' codes producers (pipeline/requant/encode_*.cpp).
Status produce_mxfp4(Job& j, ByteSink& sink);
Status produce_fp8(Job& j, ByteSink& sink);
Status produce_nf4(Job& j, ByteSink& sink);
Status produce_nvfp4(Job& j, ByteSink& sink);
Status produce_float(Job& j, ByteSink& sink);
// NF4's parameters for nested offset `off` (the quant_state JSON in the stash), and the offset
// pass once (the codes producer calls it first; a dry run, through the tensor's LateDesc).
void set_nf4_params(Job& j, float off);
Status ensure_nf4_offset(Job& j);
// How much longer an NF4 tensor's final manifest entry can be than its plan's (offset 0):
// the offset's digits in params (a double prints in at most 25 characters, "0.0" in 3) and
// one more digit in the quant_state's size, wherever it appears (params, the component's
// bytes and shape, the source record's shape). 64 leaves a margin.
constexpr uint64_t kNf4ManifestRoom = 64;

}  // namespace iris::requant
