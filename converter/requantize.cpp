#include "converter/requantize.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <type_traits>

#include "common/checked_math.h"
#include "common/float_bits.h"
#include "common/parallel_for.h"
#include "converter/source_decoder.h"
#include "formats/tile_layout.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "quant/nonfinite.h"
#include "quant/tables.h"

namespace iris {

using nlohmann::json;

namespace {

// Side components produced while the codes stream, written by the later producers.
struct Stash {
  std::vector<uint8_t> mxfp4_scales;
  std::vector<float> fp8_scales;
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

// The error for `bad` non-finite values among elements [first_index, first_index + count),
// the first of them element `at`, of value v.
Status nonfinite_error(const Job& j, uint64_t bad, uint64_t first_index, uint64_t count, uint64_t at, float v) {
  char val[32];
  std::snprintf(val, sizeof val, "%g", double(v));
  return invalid_input("tensor '" + j.source.desc.name + "': " + std::to_string(bad) + " non-finite value(s) in elements [" +
                       std::to_string(first_index) + ", " + std::to_string(first_index + count) + "), the first at index " +
                       std::to_string(first_index + at) + " (" + val + "); refusing to quantize (--allow-nonfinite to override)");
}

// Serial: it runs inside a worker, one chunk per core.
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

// Python's repr of a double (shortest round trip), as bitsandbytes writes nested_offset.
std::string py_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string torch_dtype_name(DType d) { return d == DType::kF16 ? "float16" : d == DType::kF32 ? "float32" : "bfloat16"; }

int worker_count(const Job& j, uint64_t chunks) { return int(std::clamp<uint64_t>(chunks, 1, uint64_t(requant_workers(j.opts)))); }

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
Result<const float*> decode_piece(const Job& j, Worker& w, const Chunk& c, uint64_t r0, uint64_t r1, uint64_t count) {
  const uint64_t row0 = c.m * j.n + r0;
  float* x = w.x.get(count);
  IRIS_TRY(j.decoder->decode_rows(row0, c.m * j.n + r1, x, w.decode));
  IRIS_TRY(check_finite(j, x, count, row0 * j.k));
  return static_cast<const float*>(x);
}

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

// The emit step common to every target: the chunk's sums merged and its bytes written.
Status write_chunk(Job& j, Worker& w, ByteSink& sink) {
  j.quality->merge(w.quality);
  w.quality = QualityStats();
  return sink.write(w.out);
}

Status produce_mxfp4(Job& j, ByteSink& sink) {
  const uint64_t blocks = ceil_div(j.k, 32);
  j.stash.mxfp4_scales.clear();
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    uint8_t* codes = w.codes.get((c.r1 - c.r0) * blocks * 16);
    w.scales8.resize((c.r1 - c.r0) * blocks);
    IRIS_TRY(for_each_piece_rows(j, c, 1, kPieceFloats, [&](uint64_t r0, uint64_t r1, uint64_t) -> Status {
      uint8_t* pc = codes + (r0 - c.r0) * blocks * 16;
      uint8_t* ps = w.scales8.data() + (r0 - c.r0) * blocks;
      return encode_piece_in_one_pass(j, w, c.m * j.n + r0, c.m * j.n + r1, [&](const auto* v) {
        if constexpr (std::is_same_v<decltype(v), const uint16_t*>)
          return quant::mxfp4_encode_sums_bf16(v, r1 - r0, j.k, j.opts.mxfp4_rule, pc, ps, &w.quality);
        else
          return quant::mxfp4_encode_sums(v, r1 - r0, j.k, j.opts.mxfp4_rule, pc, ps, &w.quality);
      });
    }));
    tile_rows(j, w, codes, c.r0, c.r1);
    return Status::ok();
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    j.stash.mxfp4_scales.insert(j.stash.mxfp4_scales.end(), w.scales8.begin(), w.scales8.end());
    return write_chunk(j, w, sink);
  };
  return run_chunks(j, compute, emit);
}

Status produce_fp8(Job& j, ByteSink& sink) {
  j.stash.fp8_scales.clear();
  const quant::Fp8Granularity g = j.target == Target::kFp8Tensor ? quant::Fp8Granularity::kTensor
                                  : j.target == Target::kFp8Channel ? quant::Fp8Granularity::kChannel
                                                                     : quant::Fp8Granularity::kBlock;
  // Per tensor: the amax of each matrix first, then one multiplier for all its chunks.
  std::vector<float> mul(j.batch, 1.f);
  if (g == quant::Fp8Granularity::kTensor) {
    std::vector<float> amax(j.batch, 0.f);
    auto chunk_amax = [&](Worker& w, Chunk& c) -> Status {
      w.amax = 0.f;
      return for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t, uint64_t, uint64_t count) -> Status {
        float a = w.amax;
        for (uint64_t i = 0; i < count; ++i) a = std::max(a, std::fabs(x[i]));  // NaN refused earlier
        w.amax = a;
        return Status::ok();
      });
    };
    auto merge_amax = [&](Worker& w, const Chunk& c) -> Status {
      amax[c.m] = std::max(amax[c.m], w.amax);
      return Status::ok();
    };
    IRIS_TRY(run_chunks(j, chunk_amax, merge_amax));
    for (uint64_t m = 0; m < j.batch; ++m) {
      mul[m] = quant::fp8_multiplier(amax[m]);  // the encoders' own rule (torch's 448 * (1/amax))
      j.stash.fp8_scales.push_back(1.f / mul[m]);
    }
  }
  // Block scales span 128 rows: block pieces are whole 128-row blocks (chunks are, too).
  const uint64_t piece_multiple = g == quant::Fp8Granularity::kBlock ? 128 : 1;
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    uint8_t* codes = w.codes.get(c.count);
    w.scalesf.clear();
    if (g != quant::Fp8Granularity::kTensor) {
      // Per channel or block: the scales are the piece's own (whole 128-row bands).
      IRIS_TRY(for_each_piece_rows(j, c, piece_multiple, kPieceFloats, [&](uint64_t r0, uint64_t r1, uint64_t) -> Status {
        uint8_t* pc = codes + (r0 - c.r0) * j.k;
        const size_t s0 = w.scalesf.size();
        w.scalesf.resize(s0 + quant::fp8_scale_count(1, r1 - r0, j.k, g, 128, 128));
        float* ps = w.scalesf.data() + s0;
        return encode_piece_in_one_pass(j, w, c.m * j.n + r0, c.m * j.n + r1, [&](const auto* v) {
          if constexpr (std::is_same_v<decltype(v), const uint16_t*>)
            return quant::fp8_encode_sums_bf16(v, r1 - r0, j.k, g, 128, 128, pc, ps, &w.quality);
          else
            return quant::fp8_encode_sums(v, r1 - r0, j.k, g, 128, 128, pc, ps, &w.quality);
        });
      }));
      tile_rows(j, w, codes, c.r0, c.r1);
      return Status::ok();
    }
    IRIS_TRY(for_each_piece(j, w, c, piece_multiple, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      uint8_t* pc = codes + (r0 - c.r0) * j.k;
      float* back = w.back.get(count);  // the decoded values, written with the codes
      quant::fp8_encode_unit(x, count, mul[c.m], pc, back);
      w.scalesf.push_back(j.stash.fp8_scales[c.m]);
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    tile_rows(j, w, codes, c.r0, c.r1);
    return Status::ok();
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    if (g != quant::Fp8Granularity::kTensor) j.stash.fp8_scales.insert(j.stash.fp8_scales.end(), w.scalesf.begin(), w.scalesf.end());
    return write_chunk(j, w, sink);
  };
  return run_chunks(j, compute, emit);
}

// The row multiple of NF4's pieces: pieces start on 64-element blocks (every row does when
// 64 divides K), flat layout included.
uint64_t nf4_piece_rows(const Job& j) { return 64 / std::gcd<uint64_t>(j.k, 64); }

// NF4 offset pass: the offset of the double quantization, the mean of every block's
// absmax, by a running sum over the chunks in order (no whole-tensor array). Every chunk
// starts on a 64-element block: tiled NF4 has K % 64 == 0, and flat NF4 chunks start every
// 128 rows of the flattened tensor.
Status nf4_offset_pass(Job& j, double* sum) {
  const uint64_t numel = j.batch * j.n * j.k;
  *sum = 0;
  // A BF16 source's blocks are measured on its bit patterns, without widening them to FP32
  // (the same absmax).
  const uint64_t piece_rows = nf4_piece_rows(j);
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    w.scalesf.clear();
    return for_each_piece_rows(j, c, piece_rows, kPieceFloats, [&](uint64_t r0, uint64_t r1, uint64_t count) -> Status {
      const uint64_t row0 = c.m * j.n + r0, i0 = row0 * j.k;
      const size_t s0 = w.scalesf.size();
      w.scalesf.resize(s0 + ceil_div(count, 64));
      float* absmax = w.scalesf.data() + s0;  // relative to the piece: the same blocks
      IRIS_ASSIGN_OR_RETURN(const uint16_t* bf16, j.decoder->raw_bf16_rows(row0, c.m * j.n + r1, w.decode));
      if (bf16) {
        IRIS_TRY(check_finite(j, bf16, count, i0));
        quant::nf4_block_absmax_bf16(bf16, 0, count, numel - i0, absmax);
        return Status::ok();
      }
      IRIS_ASSIGN_OR_RETURN(const float* x, decode_piece(j, w, c, r0, r1, count));
      quant::nf4_block_absmax(x, 0, count, numel - i0, absmax);
      return Status::ok();
    });
  };
  auto emit = [&](Worker& w, const Chunk&) -> Status {
    *sum = quant::nf4_absmax_sum(w.scalesf.data(), w.scalesf.size(), *sum);
    return Status::ok();
  };
  return run_chunks(j, compute, emit);
}

// The NF4 parameters of the job's descriptor, and bitsandbytes' quant_state JSON (so that
// export --dtype keep writes a checkpoint transformers loads: Python json.dumps separators
// and key order), for nested offset `off`.
void set_nf4_params(Job& j, float off) {
  char hex[11];
  std::snprintf(hex, sizeof hex, "0x%08x", f32_bits(off));
  const auto& shape = j.source.desc.shape;
  std::string shape_txt;
  for (size_t i = 0; i < shape.size(); ++i) shape_txt += (i ? ", " : "") + std::to_string(shape[i]);
  j.stash.quant_state = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"" + torch_dtype_name(j.source.desc.dtype) +
                        "\", \"shape\": [" + shape_txt + "], \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": " +
                        py_float(double(off)) + "}";
  j.desc.params = {{"block_size", 64}, {"double_quant", true}, {"nested_block_size", 256}, {"nested_offset", double(off)},
                   {"nested_offset_f32_bits", hex}, {"nibble_order", "high_first"}, {"quant_state_bytes", j.stash.quant_state.size()}};
}

// How much longer an NF4 tensor's final manifest entry can be than its plan's (offset 0):
// the offset's digits in params (a double prints in at most 25 characters, "0.0" in 3) and
// one more digit in the quant_state's size, wherever it appears (params, the component's
// bytes and shape, the source record's shape). 64 leaves a margin.
constexpr uint64_t kNf4ManifestRoom = 64;

// The NF4 offset pass, once: the nested offset and the final parameters. The codes producer
// calls it first; a dry run's IrisWriter::planned(), through the tensor's LateDesc.
Status ensure_nf4_offset(Job& j) {
  if (j.nf4_offset_known) return Status::ok();
  const bool had_decoder = j.decoder != nullptr;
  IRIS_TRY(ensure_decoder(j));
  IRIS_TRY(nf4_offset_pass(j, &j.nf4_absmax_sum));
  if (!had_decoder) j.decoder.reset();
  j.nf4_offset = quant::nf4_offset_from_sum(j.nf4_absmax_sum, ceil_div(j.batch * j.n * j.k, 64));
  set_nf4_params(j, j.nf4_offset);
  j.nf4_offset_known = true;
  return Status::ok();
}

// Appends the values of elements [max(s, p0), min(e, p0 + count)) of a piece whose first
// element is p0 to v.
void append_range(std::vector<float>& v, const float* x, uint64_t p0, uint64_t count, uint64_t s, uint64_t e) {
  const uint64_t a = std::max(s, p0), b = std::min(e, p0 + count);
  if (a < b) v.insert(v.end(), x + (a - p0), x + (b - p0));
}

// One pass. Each chunk's block absmax and codes are computed by its worker, a piece at a
// time, and so are the double quantization and the quality decode-back of the groups of 256
// blocks that lie wholly inside the chunk, each as soon as its last piece is encoded (the
// values of a group begun in an earlier piece wait in the worker's `pending`, less than a
// group). A group that straddles chunks is finished in chunk order, once its last chunk's
// absmax is known: its elements from earlier chunks wait in a carry (at most one group's
// worth) and are decoded back then; the worker keeps the chunk's values outside its inner
// groups (`head`, `tail`) for that.
Status produce_nf4(Job& j, ByteSink& sink) {
  IRIS_TRY(ensure_nf4_offset(j));
  const uint64_t numel = j.batch * j.n * j.k, nabs = ceil_div(numel, 64), nnest = ceil_div(nabs, 256), group = 64 * 256;
  const float offset = j.nf4_offset;
  std::vector<float> absmax(nabs);
  auto& dq = j.stash.nf4;
  dq.offset = offset;
  dq.absmax_codes.assign(nabs, 0);
  dq.nested_absmax.assign(nnest, 0.f);
  quant::Bnb4bitParams p;
  std::vector<float> table(16), map(256);
  for (int i = 0; i < 16; ++i) table[i] = quant::nf4_to_f32(uint8_t(i));
  for (int i = 0; i < 256; ++i) map[i] = quant::dynamic_map_value(uint8_t(i));
  p.code_table = table.data();
  p.double_quant = true;
  p.absmax_codes = dq.absmax_codes.data();
  p.nested_absmax = dq.nested_absmax.data();
  p.nested_map = map.data();
  p.nested_offset = offset;
  const bool tiled = j.desc.layout.kind == LayoutKind::kTiled;
  // The groups complete once the chunk ending at element i1 is known: all of them at the end.
  auto groups_complete = [&](uint64_t i1) { return i1 == numel ? nnest : i1 / group; };
  // The groups wholly inside [i0, i1), which its worker finishes: [first, last) (may be empty).
  auto inner_groups = [&](uint64_t i0, uint64_t i1) { return std::pair(ceil_div(i0, group), groups_complete(i1)); };
  const uint64_t piece_rows = nf4_piece_rows(j);
  uint64_t groups_done = 0, carry_start = 0;
  std::vector<float> carry_x, back_carry(group);
  std::vector<uint8_t> carry_codes;
  double sum = 0;
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    const uint64_t i0 = (c.m * j.n + c.r0) * j.k, i1 = i0 + c.count;
    uint8_t* codes = w.codes.get(ceil_div(c.count, 2));
    const auto groups = inner_groups(i0, i1);
    const uint64_t g0 = groups.first, g1 = groups.second;  // not a structured binding: the piece lambda captures them
    const bool inner = g0 < g1;
    // The values emit needs: [i0, a) and [b, i1), less than two groups (the whole chunk when
    // it holds no inner group, which only a chunk under two groups does).
    const uint64_t a = inner ? std::min(i1, g0 * group) : i1, b = inner ? std::min(i1, g1 * group) : i1;
    w.head.clear();
    w.tail.clear();
    w.pending.clear();  // the values of [done * group, the piece's start) while that is not empty
    w.quality = QualityStats();
    uint64_t done = g0;  // the inner groups finished so far
    IRIS_TRY(for_each_piece(j, w, c, piece_rows, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      const uint64_t p0 = (c.m * j.n + r0) * j.k, p1 = p0 + count;
      quant::nf4_encode_first_level(x, p0, count, numel, absmax.data(), codes + (p0 - i0) / 2);  // this chunk's blocks: no other worker's
      append_range(w.head, x, p0, count, i0, a);
      append_range(w.tail, x, p0, count, b, i1);
      if (!inner) return Status::ok();
      const uint64_t gc = p1 == i1 ? g1 : std::min(g1, p1 / group);  // inner groups complete after this piece
      if (gc > done) {
        quant::nf4_quantize_absmax_groups(absmax.data(), done, gc, nabs, offset, dq.absmax_codes.data(), dq.nested_absmax.data());
        const uint64_t e0 = done * group, e1 = std::min(numel, gc * group), s = std::max(e0, p0);
        float* back = w.back.get(std::max<uint64_t>(w.pending.size(), e1 - s));
        if (!w.pending.empty()) {  // [e0, p0)
          quant::bnb4_decode_window(codes, i0, e0, p0, p, back);
          w.quality.add(w.pending.data(), back, p0 - e0);
          w.pending.clear();
        }
        quant::bnb4_decode_window(codes, i0, s, e1, p, back);
        w.quality.add(x + (s - p0), back, e1 - s);
        done = gc;
      }
      append_range(w.pending, x, p0, count, done * group, b);  // the open group's values
      return Status::ok();
    }));
    if (tiled) tile_rows(j, w, codes, c.r0, c.r1);
    else w.out = {codes, ceil_div(c.count, 2)};  // flat: chunks are whole 64-element blocks, so whole bytes
    return Status::ok();
  };
  auto finish_chunk = [&](Worker& w, const Chunk& c) -> Status {
    const uint64_t i0 = (c.m * j.n + c.r0) * j.k, i1 = i0 + c.count;
    const uint8_t* codes = w.codes.data();  // the worker's row-major codes of this chunk
    sum = quant::nf4_absmax_sum(absmax.data() + i0 / 64, ceil_div(c.count, 64), sum);
    const auto [g0, g1] = inner_groups(i0, i1);
    const uint64_t g_end = groups_complete(i1);
    // The groups before this chunk's inner ones that this chunk completes (a straddling one).
    const uint64_t straddle_end = std::min(g0, g_end);
    if (straddle_end > groups_done)
      quant::nf4_quantize_absmax_groups(absmax.data(), groups_done, straddle_end, nabs, offset, dq.absmax_codes.data(), dq.nested_absmax.data());
    groups_done = std::max(groups_done, g_end);
    const uint64_t ready = std::min(numel, straddle_end * group);  // elements below this decode exactly as stored, outside the inner groups
    QualityStats before;  // the carry and this chunk's head, ahead of the inner groups' sums
    if (!carry_x.empty() && ready > carry_start) {
      quant::bnb4_decode_window(carry_codes.data(), carry_start, carry_start, carry_start + carry_x.size(), p, back_carry.data());
      before.add(carry_x.data(), back_carry.data(), carry_x.size());
      carry_x.clear();
      carry_codes.clear();
    }
    const uint64_t head_end = std::clamp(ready, i0, i1);  // within w.head: [i0, a) holds it
    if (head_end > i0) {
      quant::bnb4_decode_window(codes, i0, i0, head_end, p, back_carry.data());
      before.add(w.head.data(), back_carry.data(), head_end - i0);
    }
    // The tail after the inner groups (w.tail), or the rest of the chunk when it has none and
    // completes nothing (w.head past head_end), waits for its group.
    const bool inner = g0 < g1;
    const uint64_t tail_start = inner ? std::min(numel, g1 * group) : head_end;
    if (tail_start < i1) {  // tail_start is a group start, or i0: even
      if (carry_x.empty()) carry_start = tail_start;
      const float* t = inner ? w.tail.data() : w.head.data() + (head_end - i0);
      carry_x.insert(carry_x.end(), t, t + (i1 - tail_start));
      carry_codes.insert(carry_codes.end(), codes + (tail_start - i0) / 2, codes + ceil_div(c.count, 2));
    }
    before.merge(w.quality);
    w.quality = before;
    return write_chunk(j, w, sink);
  };
  IRIS_TRY(run_chunks(j, compute, finish_chunk));
  if (groups_done != nnest || !carry_x.empty()) return internal_error("tensor '" + j.desc.name + "': NF4 groups left unfinished");
  // The planned offset is in the manifest already: a source that changed on disk since planning
  // would no longer match it.
  if (sum != j.nf4_absmax_sum)
    return invalid_input("tensor '" + j.source.desc.name + "': its values changed while converting (the source was modified?)");
  return Status::ok();
}

Status produce_bf16(Job& j, ByteSink& sink) {
  auto compute = [&](Worker& w, Chunk& c) -> Status {
    auto* out = reinterpret_cast<uint16_t*>(w.codes.get(c.count * 2));
    IRIS_TRY(for_each_piece(j, w, c, 1, kPieceFloats, [&](const float* x, uint64_t r0, uint64_t, uint64_t count) -> Status {
      uint16_t* po = out + (r0 - c.r0) * j.k;
      float* back = w.back.get(count);
      for (uint64_t i = 0; i < count; ++i) {
        po[i] = f32_to_bf16(x[i]);
        back[i] = bf16_to_f32(po[i]);
      }
      w.quality.add(x, back, count);
      return Status::ok();
    }));
    w.out = {reinterpret_cast<const uint8_t*>(out), c.count * 2};
    return Status::ok();
  };
  return run_chunks(j, compute, [&](Worker& w, const Chunk&) { return write_chunk(j, w, sink); });
}

// The producer of the streamed component; the job's decoder is dropped once it has run.
ComponentProducer codes_producer(std::shared_ptr<Job> j, Status (*produce)(Job&, ByteSink&)) {
  return [j, produce](ByteSink& s) {
    Status st = produce(*j, s);
    j->decoder.reset();  // the producers, and so the job, live until the whole archive is written
    return st;
  };
}

// A side component from the stash (`pick` names it), freed once written: the stash holds one
// tensor's side components at most, never the model's.
template <typename Pick>
ComponentProducer stash_bytes(std::shared_ptr<Job> j, Pick pick) {
  return [j, pick](ByteSink& s) {
    auto& v = pick(j->stash);
    const Status st = s.write({reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0])});
    std::remove_reference_t<decltype(v)>().swap(v);
    return st;
  };
}

std::vector<uint8_t> f32_table(float (*f)(uint8_t), int n) {
  std::vector<uint8_t> out(n * 4);
  for (int i = 0; i < n; ++i) {
    float v = f(uint8_t(i));
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

json part(const std::string& role, const std::string& name, const char* dtype, std::vector<uint64_t> shape) {
  return {{"role", role}, {"name", name}, {"dtype", dtype}, {"shape", std::move(shape)}};
}

}  // namespace

int requant_workers(const RequantOptions& o) { return o.workers > 0 ? o.workers : std::max(1, omp_get_max_threads()); }

uint64_t requant_chunk_rows(uint64_t tile_n, uint64_t k, uint64_t chunk_floats) {
  const uint64_t base = std::lcm<uint64_t>(std::max<uint64_t>(tile_n, 1), 128);
  return std::max<uint64_t>(base, chunk_floats / std::max<uint64_t>(k, 1) / base * base);
}

Result<RequantPlan> plan_requantize(const SourceTensor& source, Target target, const RequantOptions& o) {
  auto job = std::make_shared<Job>();
  Job& j = *job;
  j.source = source;
  j.target = target;
  j.opts = o;
  IRIS_ASSIGN_OR_RETURN(j.decoder, SourceDecoder::create(source));
  const auto& shape = source.desc.shape;
  TensorDesc& d = j.desc;
  d.name = source.desc.name;
  d.shape = shape;
  d.dtype = source.desc.dtype == DType::kF16 || source.desc.dtype == DType::kF32 ? source.desc.dtype : DType::kBF16;
  if (target == Target::kBf16) {
    d.dtype = DType::kBF16;
    d.format = Format::kRaw;
    j.k = j.decoder->k();
    j.n = j.decoder->rows();
  } else {
    if (shape.size() < 2)
      return usage_error("tensor '" + d.name + "': " + target_name(target) + " needs a matrix, the tensor has shape " + json(shape).dump());
    j.n = shape[shape.size() - 2];
    j.k = shape.back();
    for (size_t i = 0; i + 2 < shape.size(); ++i) j.batch *= shape[i];
    if (j.k == 0 || j.n == 0) return usage_error("tensor '" + d.name + "': cannot quantize an empty matrix");
  }
  const uint64_t numel = j.batch * j.n * j.k;
  json parts = json::array();
  const std::string base = d.name;
  std::vector<uint64_t> prefix(shape.begin(), shape.end() - std::min<size_t>(2, shape.size()));
  RequantPlan plan;
  switch (target) {
    case Target::kMxfp4: {
      d.format = Format::kMxfp4;
      d.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"},
                  {"scale_rule", o.mxfp4_rule == quant::Mxfp4ScaleRule::kSearch ? "search" : "ocp_floor"}};
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      auto blocks_shape = prefix;
      blocks_shape.insert(blocks_shape.end(), {j.n, ceil_div(j.k, 32), 16});
      auto scales_shape = prefix;
      scales_shape.insert(scales_shape.end(), {j.n, ceil_div(j.k, 32)});
      parts.push_back(part("codes", base + "_blocks", "U8", blocks_shape));
      parts.push_back(part("scales", base + "_scales", "U8", scales_shape));
      plan.producers = {codes_producer(job, produce_mxfp4), stash_bytes(job, [](Stash& x) -> auto& { return x.mxfp4_scales; })};
      break;
    }
    case Target::kFp8Tensor:
    case Target::kFp8Channel:
    case Target::kFp8Block: {
      d.format = Format::kFp8E4M3;
      std::vector<uint64_t> sshape = prefix;
      std::string gran, scale_name = "weight_scale";
      if (target == Target::kFp8Tensor) {
        gran = "tensor";
        sshape.push_back(1);
      } else if (target == Target::kFp8Channel) {
        gran = "channel";
        sshape.insert(sshape.end(), {j.n, 1});
      } else {
        gran = "block";
        scale_name = "weight_scale_inv";
        sshape.insert(sshape.end(), {ceil_div(j.n, 128), ceil_div(j.k, 128)});
      }
      d.params = {{"scale_granularity", gran}, {"scale_dtype", "f32"}, {"scale_shape", sshape}, {"scale_name", scale_name}};
      if (gran == "block") {
        d.params["block_n"] = 128;
        d.params["block_k"] = 128;
      }
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      // HF naming: P.weight + P.weight_scale_inv (blocks) or P.weight_scale (tensor, channel).
      const std::string scale_tensor = base.size() > 7 && base.ends_with(".weight") ? base + (gran == "block" ? "_scale_inv" : "_scale")
                                                                                   : base + "." + scale_name;
      parts.push_back(part("codes", base, "F8_E4M3", shape));
      parts.push_back(part("scales", scale_tensor, "F32", sshape));
      plan.producers = {codes_producer(job, produce_fp8), stash_bytes(job, [](Stash& x) -> auto& { return x.fp8_scales; })};
      break;
    }
    case Target::kNf4: {
      d.format = Format::kNf4;
      d.params = {{"block_size", 64}, {"double_quant", true}};
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      if (d.layout.kind == LayoutKind::kFlat) {
        // Blocks follow the flattened tensor: chunk it as one matrix so that every chunk
        // starts on a 64-element block, across the boundaries of stacked matrices too.
        j.n *= j.batch;
        j.batch = 1;
      }
      // The nested offset (a manifest parameter) is the mean of every block's absmax: a pass
      // over the values, which the codes producer makes when the tensor's turn comes, beside the
      // writing of the tensors before it (formats/iris_writer.h: LateDesc). Planned with 0.
      set_nf4_params(j, 0.0f);
      const uint64_t nabs = ceil_div(numel, 64);
      parts.push_back(part("codes", base, "U8", {ceil_div(numel, 2), 1}));
      parts.push_back(part("absmax", base + ".absmax", "U8", {nabs}));
      parts.push_back(part("nested_absmax", base + ".nested_absmax", "F32", {ceil_div(nabs, 256)}));
      parts.push_back(part("code_table", base + ".quant_map", "F32", {16}));
      parts.push_back(part("nested_code_table", base + ".nested_quant_map", "F32", {256}));
      parts.push_back(part("quant_state", base + ".quant_state.bitsandbytes__nf4", "U8", {j.stash.quant_state.size()}));
      plan.late.manifest_room = kNf4ManifestRoom;
      plan.late.finish = [job](TensorDesc& desc, json& source) -> Status {
        IRIS_TRY(ensure_nf4_offset(*job));
        desc.params = job->desc.params;
        for (auto& t : source["tensors"])
          if (t["role"] == "quant_state") t["shape"] = {job->stash.quant_state.size()};
        return Status::ok();
      };
      plan.producers = {codes_producer(job, produce_nf4), stash_bytes(job, [](Stash& x) -> auto& { return x.nf4.absmax_codes; }),
                        stash_bytes(job, [](Stash& x) -> auto& { return x.nf4.nested_absmax; }),
                        [](ByteSink& s) { return s.write(f32_table(quant::nf4_to_f32, 16)); },
                        [](ByteSink& s) { return s.write(f32_table(quant::dynamic_map_value, 256)); },
                        [job](ByteSink& s) {
                          const auto& q = job->stash.quant_state;
                          return s.write({reinterpret_cast<const uint8_t*>(q.data()), q.size()});
                        }};
      break;
    }
    case Target::kBf16:
      parts.push_back(part("data", base, "BF16", shape));
      plan.producers = {codes_producer(job, produce_bf16)};
      break;
    case Target::kKeep:
      return internal_error("plan_requantize called for keep");
  }
  // The decoder is made again when the tensor's turn comes: between now and then it would
  // hold buffers for nothing while the other tensors are planned.
  j.decoder.reset();
  plan.desc = d;
  plan.source_record = {{"tensors", parts}, {"requantized_from", is_quantized(source.desc.format) ? format_name(source.desc.format)
                                                                                                 : std::string(dtype_archive_name(source.desc.dtype))}};
  plan.quality = j.quality;
  return plan;
}

}  // namespace iris
