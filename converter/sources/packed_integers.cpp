#include "converter/sources/packed_integers.h"

#include <cmath>
#include <cstring>

#include "common/float_bits.h"
#include "converter/sources/schemes/scheme_helpers.h"
#include "converter/sources/source_decoder.h"
#include "quant/int_group.h"

namespace iris {

namespace {

using schemes::where;

// AWQ's nibble j holds column 8w + kAwqOrder[j]; column c % 8 is at nibble kAwqNibble[c % 8].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// Bytes [offset, offset + n) of a companion, bounds-checked against its stored size.
Status read_bytes(const SnapshotTensor& t, uint64_t offset, uint64_t n, void* dst) {
  if (offset > t.tensor->size || n > t.tensor->size - offset)
    return invalid_input(where(t) + "holds " + std::to_string(t.tensor->size) + " bytes, fewer than its shape needs");
  return t.file->mapping().read_at(t.tensor->offset + offset, static_cast<uint8_t*>(dst), n);
}

// `bits` bits from bit `bit` of a bit stream whose word i is words[i * stride] (little-endian
// words; a code may straddle two).
inline uint32_t stream_bits(const uint32_t* words, uint64_t stride, uint64_t bit, int bits) {
  const uint64_t w = bit >> 5;
  const uint32_t off = uint32_t(bit & 31);
  uint64_t v = words[w * stride] >> off;
  if (off + uint32_t(bits) > 32) v |= uint64_t(words[(w + 1) * stride]) << (32 - off);
  return uint32_t(v) & ((1u << bits) - 1u);
}

// GPTQ v1's stored zero words back to the zeros themselves (PackedIntegers::gptq_v1): one added
// to every field of the word at once, carries crossing fields, at 2, 4 and 8 bits.
inline uint32_t v1_word_to_v2(uint32_t w, int bits) {
  switch (bits) {
    case 2: return w + 0x55555555u;
    case 4: return w + 0x11111111u;
    case 8: return w + 0x01010101u;
    default: return w;  // 3 bits: per field (stored_zero)
  }
}
// A stored zero field as the zero itself.
inline int32_t stored_zero(uint32_t field, bool gptq_v1, int bits) {
  return gptq_v1 && bits == 3 ? int32_t((field + 1) & 7u) : int32_t(field);
}

// A group's scale widened to FP32 (exactly).
inline float scale_value(const uint8_t* p, DType dt) {
  uint16_t h;
  float f;
  switch (dt) {
    case DType::kF16: std::memcpy(&h, p, 2); return f16_to_f32(h);
    case DType::kBF16: std::memcpy(&h, p, 2); return bf16_to_f32(h);
    default: std::memcpy(&f, p, 4); return f;
  }
}

// AWQ's nibbles of outputs [r0, r1) from each of the `lines` rows of a [lines, n / 8] word
// tensor (its codes: lines = K; its zeros: lines = G): store(output - r0, line, value).
template <typename Store>
Status unpack_awq(const SnapshotTensor& t, uint64_t lines, uint64_t n, uint64_t r0, uint64_t r1, std::vector<uint8_t>& raw, Store store) {
  const uint64_t w0 = r0 / 8, span = (r1 + 7) / 8 - w0, row_words = n / 8;
  raw.resize(lines * span * 4);
  for (uint64_t l = 0; l < lines; ++l) IRIS_TRY(read_bytes(t, (l * row_words + w0) * 4, span * 4, raw.data() + l * span * 4));
  const auto* words = reinterpret_cast<const uint32_t*>(raw.data());
  for (uint64_t out = r0; out < r1; ++out) {
    const uint32_t shift = 4 * uint32_t(kAwqNibble[out % 8]);
    for (uint64_t l = 0; l < lines; ++l) store(out - r0, l, (words[l * span + out / 8 - w0] >> shift) & 15u);
  }
  return Status::ok();
}

// Codes of rows [r0, r1) into s.codes [rows, k].
Status unpack_codes(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& s) {
  const uint64_t rows = r1 - r0;
  std::vector<uint8_t>& raw = s.aux;
  const uint32_t mask = (1u << p.bits) - 1u;
  switch (p.packing) {
    case IntPacking::kGptq: {
      // [K * bits / 32, N]: each word row's slice of columns [r0, r1).
      const uint64_t word_rows = p.k * uint64_t(p.bits) / 32;
      raw.resize(word_rows * rows * 4);
      for (uint64_t i = 0; i < word_rows; ++i) IRIS_TRY(read_bytes(p.codes, (i * p.n + r0) * 4, rows * 4, raw.data() + i * rows * 4));
      const auto* words = reinterpret_cast<const uint32_t*>(raw.data());
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < p.k; ++c) s.codes[r * p.k + c] = uint8_t(stream_bits(words + r, rows, uint64_t(p.bits) * c, p.bits));
      return Status::ok();
    }
    case IntPacking::kAwq:  // [K, N / 8]
      return unpack_awq(p.codes, p.k, p.n, r0, r1, raw, [&](uint64_t r, uint64_t c, uint32_t v) { s.codes[r * p.k + c] = uint8_t(v); });
    case IntPacking::kCompressedTensors: {
      // [N, ceil(K / per_word)]: rows [r0, r1) are contiguous.
      const uint64_t per_word = 32 / uint64_t(p.bits), row_words = (p.k + per_word - 1) / per_word;
      raw.resize(rows * row_words * 4);
      IRIS_TRY(read_bytes(p.codes, r0 * row_words * 4, rows * row_words * 4, raw.data()));
      const auto* words = reinterpret_cast<const uint32_t*>(raw.data());
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < p.k; ++c)
          s.codes[r * p.k + c] = uint8_t((words[r * row_words + c / per_word] >> (uint32_t(p.bits) * uint32_t(c % per_word))) & mask);
      return Status::ok();
    }
    case IntPacking::kBnbInt8: {
      // [N, K] signed bytes: rows [r0, r1) are contiguous; q + 128 is q's byte with its top bit flipped.
      IRIS_TRY(read_bytes(p.codes, r0 * p.k, rows * p.k, s.codes.data()));
      for (uint64_t i = 0; i < rows * p.k; ++i) s.codes[i] ^= 0x80u;
      return Status::ok();
    }
  }
  return internal_error("unknown integer packing");
}

// Scales stored [N, G] (a row's groups together) rather than GPTQ's and AWQ's [G, N].
bool scales_by_row(const PackedIntegers& p) { return p.packing == IntPacking::kCompressedTensors || p.packing == IntPacking::kBnbInt8; }

// Zero points of rows [r0, r1) into s.zeros [rows, groups].
Status unpack_zeros(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& s) {
  const uint64_t rows = r1 - r0;
  std::vector<uint8_t>& raw = s.nested;
  const uint32_t mask = (1u << p.bits) - 1u;
  switch (p.packing) {
    case IntPacking::kGptq: {
      // [G, N * bits / 32]: row g's words covering bits [bits r0, bits r1).
      const uint64_t row_words = p.n * uint64_t(p.bits) / 32;
      const uint64_t w0 = uint64_t(p.bits) * r0 / 32, w1 = std::min(row_words, (uint64_t(p.bits) * r1 + 31) / 32), span = w1 - w0;
      raw.resize(p.groups * (span + 1) * 4);
      std::memset(raw.data(), 0, raw.size());
      for (uint64_t g = 0; g < p.groups; ++g)
        IRIS_TRY(read_bytes(p.zeros, (g * row_words + w0) * 4, span * 4, raw.data() + g * (span + 1) * 4));
      auto* words = reinterpret_cast<uint32_t*>(raw.data());
      if (p.gptq_v1)
        for (uint64_t i = 0; i < p.groups * (span + 1); ++i) words[i] = v1_word_to_v2(words[i], p.bits);
      for (uint64_t g = 0; g < p.groups; ++g)
        for (uint64_t r = 0; r < rows; ++r)
          s.zeros[r * p.groups + g] =
              stored_zero(stream_bits(words + g * (span + 1), 1, uint64_t(p.bits) * (r0 + r) - 32 * w0, p.bits), p.gptq_v1, p.bits);
      return Status::ok();
    }
    case IntPacking::kAwq:  // [G, N / 8]
      return unpack_awq(p.zeros, p.groups, p.n, r0, r1, raw, [&](uint64_t r, uint64_t g, uint32_t v) { s.zeros[r * p.groups + g] = int32_t(v); });
    case IntPacking::kCompressedTensors: {
      // [ceil(N / per_word), G]: word rows [r0 / per_word, ceil(r1 / per_word)).
      const uint64_t per_word = 32 / uint64_t(p.bits);
      const uint64_t w0 = r0 / per_word, w1 = (r1 + per_word - 1) / per_word, span = w1 - w0;
      raw.resize(span * p.groups * 4);
      IRIS_TRY(read_bytes(p.zeros, w0 * p.groups * 4, span * p.groups * 4, raw.data()));
      const auto* words = reinterpret_cast<const uint32_t*>(raw.data());
      for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t n = r0 + r;
        const uint32_t shift = uint32_t(p.bits) * uint32_t(n % per_word);
        for (uint64_t g = 0; g < p.groups; ++g)
          s.zeros[r * p.groups + g] = int32_t((words[(n / per_word - w0) * p.groups + g] >> shift) & mask);
      }
      return Status::ok();
    }
    case IntPacking::kBnbInt8: break;  // no zero-point tensor (the implicit 128)
  }
  return internal_error("unknown integer packing");
}

// Scales of rows [r0, r1) into s.scales [rows, groups].
Status read_scales(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& s) {
  const uint64_t rows = r1 - r0, es = dtype_bits(p.scale_dtype) / 8;
  std::vector<uint8_t> raw(rows * p.groups * es);
  if (scales_by_row(p)) {
    IRIS_TRY(read_bytes(p.scales, r0 * p.groups * es, rows * p.groups * es, raw.data()));
    for (uint64_t i = 0; i < rows * p.groups; ++i) s.scales[i] = scale_value(raw.data() + i * es, p.scale_dtype);
    return Status::ok();
  }
  // [G, N]: row g's slice of columns [r0, r1).
  for (uint64_t g = 0; g < p.groups; ++g) IRIS_TRY(read_bytes(p.scales, (g * p.n + r0) * es, rows * es, raw.data() + g * rows * es));
  for (uint64_t g = 0; g < p.groups; ++g)
    for (uint64_t r = 0; r < rows; ++r) s.scales[r * p.groups + g] = scale_value(raw.data() + (g * rows + r) * es, p.scale_dtype);
  return Status::ok();
}

class PackedIntegerDecoder final : public SourceDecoder {
 public:
  explicit PackedIntegerDecoder(std::shared_ptr<const PackedIntegers> p) : p_(std::move(p)) {}

  Status init() {
    const PackedIntegers& p = *p_;
    rows_ = p.n;
    k_ = p.k;
    IRIS_ASSIGN_OR_RETURN(group_of_, packed_group_of(p));
    return Status::ok();
  }

  Status decode_rows(uint64_t r0, uint64_t r1, float* out, DecodeScratch& s) const override {
    const PackedIntegers& p = *p_;
    IRIS_TRY(unpack_packed_rows(p, r0, r1, s));
    quant::int_group_decode_rows(
        {s.codes.data(), s.zeros.data(), s.scales.data(), group_of_.data(), r1 - r0, p.k, p.groups, p.scale_dtype, p.post_factor}, out);
    return Status::ok();
  }

 private:
  std::shared_ptr<const PackedIntegers> p_;
  std::vector<uint32_t> group_of_;
};
}  // namespace

Status unpack_packed_rows(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& s) {
  const uint64_t rows = r1 - r0;
  s.codes.resize(rows * p.k);
  s.scales.resize(rows * p.groups);
  IRIS_TRY(unpack_codes(p, r0, r1, s));
  IRIS_TRY(unpack_packed_zeros(p, r0, r1, s));
  return read_scales(p, r0, r1, s);
}

Status unpack_packed_zeros(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& s) {
  s.zeros.assign((r1 - r0) * p.groups, p.zeros.tensor ? 0 : p.implicit_zero);
  return p.zeros.tensor ? unpack_zeros(p, r0, r1, s) : Status::ok();
}

Result<std::vector<uint8_t>> packed_scale_bytes(const PackedIntegers& p) {
  const uint64_t es = dtype_bits(p.scale_dtype) / 8;
  std::vector<uint8_t> stored(p.n * p.groups * es);
  IRIS_TRY(read_bytes(p.scales, 0, stored.size(), stored.data()));
  if (scales_by_row(p)) return stored;
  std::vector<uint8_t> out(stored.size());  // [G, N] -> [N, G]
  for (uint64_t g = 0; g < p.groups; ++g)
    for (uint64_t n = 0; n < p.n; ++n) std::memcpy(out.data() + (n * p.groups + g) * es, stored.data() + (g * p.n + n) * es, es);
  return out;
}

Result<std::vector<uint32_t>> packed_group_of(const PackedIntegers& p) {
  std::vector<uint32_t> group_of(p.k);
  if (!p.g_idx.tensor) {
    for (uint64_t c = 0; c < p.k; ++c) group_of[c] = uint32_t(c / p.group);
    return group_of;
  }
  std::vector<int32_t> g(p.k);
  IRIS_TRY(read_bytes(p.g_idx, 0, p.k * 4, g.data()));
  for (uint64_t c = 0; c < p.k; ++c) {
    if (g[c] < 0 || uint64_t(g[c]) >= p.groups)
      return invalid_input(where(p.g_idx) + "column " + std::to_string(c) + " names group " + std::to_string(g[c]) + " of " + std::to_string(p.groups));
    group_of[c] = uint32_t(g[c]);
  }
  return group_of;
}

std::string PackedIntegers::describe() const {
  std::string s = scheme + " int" + std::to_string(bits);
  s += group >= k ? " channel" : " g" + std::to_string(group);
  if (g_idx.tensor) s += " g_idx";
  return s;
}

Result<std::unique_ptr<SourceDecoder>> make_packed_integer_decoder(const SourceTensor& source) {
  if (!source.packed) return internal_error("tensor '" + source.desc.name + "' is not packed integers");
  auto d = std::make_unique<PackedIntegerDecoder>(source.packed);
  IRIS_TRY(d->init());
  return std::unique_ptr<SourceDecoder>(std::move(d));
}

Status check_packed_integers(const PackedIntegers& p, bool columns_in_order, bool symmetric, const PackedIntegerAllowances& allow) {
  // Scales: every group's, finite and nonzero (a zero scale makes its group's weights 0
  // whatever the codes; a non-finite one makes them NaN or Inf).
  // LLM.int8's SCB is a row's absmax: 0 is an all-zero row, which bitsandbytes writes so.
  if (!allow.suspect_scales) {
    const uint64_t es = dtype_bits(p.scale_dtype) / 8, count = p.n * p.groups;
    std::vector<uint8_t> raw(count * es);
    IRIS_TRY(read_bytes(p.scales, 0, raw.size(), raw.data()));
    for (uint64_t i = 0; i < count; ++i) {
      const float v = scale_value(raw.data() + i * es, p.scale_dtype);
      if ((v == 0.0f && p.packing != IntPacking::kBnbInt8) || !std::isfinite(v)) {
        // Scales are [G, N] for GPTQ and AWQ, [N, G] for compressed-tensors and LLM.int8.
        const bool by_group = !scales_by_row(p);
        const uint64_t row = by_group ? i % p.n : i / p.groups, group = by_group ? i / p.n : i % p.groups;
        return invalid_input(where(p.scales) + "the scale of output row " + std::to_string(row) + ", group " + std::to_string(group) + " is " +
                             (v == 0.0f ? "zero" : std::isnan(v) ? "NaN" : "infinite") +
                             " (allow zero or non-finite scales explicitly to decode them as the tool would)");
      }
    }
  }
  // g_idx: each group holds its share of the columns (group, the last one the rest), and where
  // the config says the columns are in order (desc_act false), column k is in group k / group.
  if (p.g_idx.tensor && !allow.g_idx_mismatch) {
    std::vector<int32_t> g(p.k);
    IRIS_TRY(read_bytes(p.g_idx, 0, p.k * 4, g.data()));
    std::vector<uint64_t> count(p.groups, 0);
    for (uint64_t c = 0; c < p.k; ++c) {
      if (g[c] < 0 || uint64_t(g[c]) >= p.groups)
        return invalid_input(where(p.g_idx) + "column " + std::to_string(c) + " names group " + std::to_string(g[c]) + ", not one of the " +
                             std::to_string(p.groups) + " groups");
      if (columns_in_order && uint64_t(g[c]) != c / p.group)
        return invalid_input(where(p.g_idx) + "column " + std::to_string(c) + " is in group " + std::to_string(g[c]) + ", not " +
                             std::to_string(c / p.group) + " as the config's column order (desc_act false) says" +
                             " (allow a g_idx mismatch explicitly to decode by g_idx)");
      ++count[uint64_t(g[c])];
    }
    for (uint64_t gr = 0; gr < p.groups; ++gr) {
      const uint64_t want = std::min(p.group, p.k - std::min(p.k, gr * p.group));
      if (count[gr] != want)
        return invalid_input(where(p.g_idx) + "group " + std::to_string(gr) + " holds " + std::to_string(count[gr]) + " columns, not " +
                             std::to_string(want) + " (a g_idx that is not a permutation of groups of " + std::to_string(p.group) +
                             "; allow a g_idx mismatch explicitly)");
    }
  }
  // GPTQ's symmetric zero is 2^(bits-1): stored as that in gptq_v2, minus one in v1.
  if (p.packing == IntPacking::kGptq && symmetric && p.zeros.tensor && !allow.zero_convention) {
    // (The symmetric zero is never 0, so no v1 field borrows: each field is compared alone.)
    const uint64_t row_words = p.n * uint64_t(p.bits) / 32;
    std::vector<uint32_t> words(p.groups * row_words + 1, 0);
    IRIS_TRY(read_bytes(p.zeros, 0, p.groups * row_words * 4, words.data()));
    const int32_t want = 1 << (p.bits - 1), v1_field = want - 1;
    for (uint64_t g = 0; g < p.groups; ++g)
      for (uint64_t n = 0; n < p.n; ++n) {
        const int32_t stored = int32_t(stream_bits(words.data() + g * row_words, 1, uint64_t(p.bits) * n, p.bits));
        if (stored == (p.gptq_v1 ? v1_field : want)) continue;
        const bool other = stored == (p.gptq_v1 ? want : v1_field);  // the other convention's symmetric zero
        return invalid_input(where(p.zeros) + "group " + std::to_string(g) + ", output row " + std::to_string(n) + " stores zero point " +
                             std::to_string(stored) + "; the config says symmetric " + std::to_string(p.bits) + "-bit " +
                             (p.gptq_v1 ? "gptq (v1), which stores " + std::to_string(v1_field)
                                        : "gptq_v2, which stores " + std::to_string(want)) +
                             (other ? std::string(" -- the other checkpoint_format's convention") : std::string()) +
                             " (allow a zero-point convention mismatch explicitly to decode as declared)");
      }
  }
  return Status::ok();
}

}  // namespace iris
