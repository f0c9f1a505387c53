// Requantization to NF4 with bitsandbytes' double quantization: the nested offset's pass
// over the values first, then one pass that encodes, double-quantizes each group of 256
// blocks as soon as it is complete and decodes it back for the quality sums.
#include "converter/pipeline/requant/chunk_engine.h"

#include <charconv>
#include <cstdio>
#include <numeric>

#include "common/checked_math.h"
#include "common/float_bits.h"
#include "quant/nf4.h"
#include "quant/tables.h"

namespace iris::requant {

namespace {

// Python's repr of a double (shortest round trip), as bitsandbytes writes nested_offset.
std::string py_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string torch_dtype_name(DType d) { return d == DType::kF16 ? "float16" : d == DType::kF32 ? "float32" : "bfloat16"; }

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

// Appends the values of elements [max(s, p0), min(e, p0 + count)) of a piece whose first
// element is p0 to v.
void append_range(std::vector<float>& v, const float* x, uint64_t p0, uint64_t count, uint64_t s, uint64_t e) {
  const uint64_t a = std::max(s, p0), b = std::min(e, p0 + count);
  if (a < b) v.insert(v.end(), x + (a - p0), x + (b - p0));
}

}  // namespace

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

}  // namespace iris::requant
