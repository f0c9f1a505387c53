#include "converter/sources/source_decoder.h"

#include <array>
#include <optional>

#include <cstring>

#include "common/float_bits.h"
#include "common/parallel_for.h"
#include "quant/fp8.h"
#include "quant/int_group.h"
#include "quant/mxfp4.h"
#include "quant/nvfp4.h"
#include "quant/nf4.h"
#include "quant/tables.h"
#include "formats/tensor_decode.h"

namespace iris {


namespace {

class RawDecoder final : public SourceDecoder {
 public:
  explicit RawDecoder(const SourceTensor& s) : t_(s.parts[0].ref), check_(s.check) {}
  Status init(const TensorDesc& d) {
    k_ = d.shape.empty() ? 1 : d.shape.back();
    uint64_t numel = 1;
    for (auto x : d.shape) numel *= x;
    rows_ = k_ ? numel / k_ : 0;
    es_ = dtype_bits(d.dtype) / 8;
    return Status::ok();
  }
  Result<const uint16_t*> raw_bf16_rows(uint64_t r0, uint64_t r1, DecodeScratch& scratch) const override {
    if (t_.tensor->dtype != DType::kBF16) return nullptr;
    IRIS_TRY(checked());
    IRIS_TRY(read_rows(r0, r1, scratch));
    return reinterpret_cast<const uint16_t*>(scratch.codes.data());
  }
  Status decode_rows(uint64_t r0, uint64_t r1, float* out, DecodeScratch& scratch) const override {
    IRIS_TRY(checked());
    IRIS_TRY(read_rows(r0, r1, scratch));
    const std::vector<uint8_t>& buf = scratch.codes;
    const int64_t n = int64_t((r1 - r0) * k_);
    // One loop per dtype (no per-element switch), in parallel: this runs over every value.
    // (Called from a requantizing worker, whose ThreadLimit(1) keeps it on that worker's thread.)
    switch (t_.tensor->dtype) {
      case DType::kBF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(buf.data());
        parallel_blocks(n, int64_t(kGrainValues), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] = bf16_to_f32(h[i]);
        });
        break;
      }
      case DType::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(buf.data());
        parallel_blocks(n, int64_t(kGrainValues), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] = f16_to_f32(h[i]);
        });
        break;
      }
      case DType::kF32: std::memcpy(out, buf.data(), size_t(n) * 4); break;
      default: {
        const auto* d = reinterpret_cast<const double*>(buf.data());
        for (int64_t i = 0; i < n; ++i) out[i] = float(d[i]);
      }
    }
    return Status::ok();
  }

 private:
  // The source bytes of rows [r0, r1) into scratch.codes, reused across calls: a fresh
  // buffer per chunk costs a zero fill and page faults.
  Status read_rows(uint64_t r0, uint64_t r1, DecodeScratch& scratch) const {
    std::vector<uint8_t>& buf = scratch.codes;
    if (buf.size() < (r1 - r0) * k_ * es_) buf.resize((r1 - r0) * k_ * es_);
    const MappedFile& file = t_.file->mapping();
    const uint64_t at = t_.tensor->offset + r0 * k_ * es_, n = (r1 - r0) * k_ * es_;
    // The rows the chunks kReadAhead on will read, asked for now (the first chunk: all of them)
    file.will_need(r0 == 0 ? at : at + MappedFile::kReadAhead, r0 == 0 ? MappedFile::kReadAhead + n : n);
    return file.read_at(at, buf.data(), n);
  }
  Status checked() const { return check_ ? check_->run() : Status::ok(); }
  SnapshotTensor t_;
  std::shared_ptr<CheckOnce> check_;  // an archive source's checksums, shared with its tensor
  uint64_t es_ = 2;
};

// Quantized sources are read per row range, like unquantized ones: a decoder holds only its
// small side tables (code books, FP8 scales), so requantizing a quantized checkpoint stays
// within the same memory bound as a BF16 one (issue 12). Each decode_rows call reads the codes
// of its rows and the slice of every per-block component they need.
class QuantizedDecoder final : public SourceDecoder {
 public:
  Status init(const SourceTensor& s) {
    d_ = s.desc;
    check_ = s.check;
    for (const auto& p : s.parts) {
      refs_[int(p.role)] = p.ref;
      if (p.tiled && p.role != Role::kCodes) return internal_error(tensor_context(d_) + "only its codes can be tiled");
      if (p.tiled) tiled_codes_ = p;
    }
    // (An archive source's checksums are checked by the first decode_rows, before any value
    // leaves this decoder: the small tables read here are only numbers until then.)
    if (d_.shape.empty()) return invalid_input(tensor_context(d_) + "a quantized tensor has no shape");
    k_ = d_.shape.back();
    uint64_t numel = 1;
    for (auto x : d_.shape) numel *= x;
    rows_ = k_ ? numel / k_ : 0;  // an empty matrix: refused by its caller, never divided by
    n_ = d_.shape.size() >= 2 ? d_.shape[d_.shape.size() - 2] : 1;
    // The grouped descriptor's parameters are checked before any decoder divides by them.
    if (d_.format == Format::kMxfp4) IRIS_TRY(mxfp4_params(d_).status());
    if (d_.format == Format::kNf4 || d_.format == Format::kBnbFp4) {
      IRIS_ASSIGN_OR_RETURN(bnb_, bnb4_params(d_));
      // The code books are small and read whole (bnb4_decode_params takes them from here).
      for (Role r : {Role::kCodeTable, Role::kNestedCodeTable})
        if (refs_[int(r)].tensor) IRIS_TRY(read_whole(r, &small_[int(r)]));
    }
    if (d_.format == Format::kIntGroup) {
      IRIS_ASSIGN_OR_RETURN(int_group_, int_group_params(d_));
      // The permutation (4 bytes a column a matrix) is read whole and checked to be one.
      if (int_group_.act_order) {
        std::vector<uint8_t> bytes;
        IRIS_TRY(read_whole(Role::kPermutation, &bytes));
        perm_.resize(bytes.size() / 4);
        std::memcpy(perm_.data(), bytes.data(), perm_.size() * 4);
        if (perm_.size() != (n_ ? rows_ / n_ : 0) * k_) return invalid_input(tensor_context(d_) + "permutation of the wrong size");
        IRIS_TRY(check_int_group_permutation(d_, bytes));
      }
    }
    if (d_.format == Format::kNvfp4) {
      IRIS_ASSIGN_OR_RETURN(Nvfp4Params np, nvfp4_params(d_));
      nvfp4_ = {np.tensor_scale_divides, np.negative_zero};
      if (k_ % 16 != 0 && !tiled_codes_) return invalid_input(tensor_context(d_) + "NVFP4 rows of a checkpoint must be whole 16-element blocks");
      // One FP32 scale a matrix: read whole.
      std::vector<uint8_t> bytes;
      IRIS_TRY(read_whole(Role::kTensorScale, &bytes));
      if (bytes.size() != 4 * (n_ ? rows_ / n_ : 0)) return invalid_input(tensor_context(d_) + "tensor scales of the wrong size");
      tensor_scales_.resize(bytes.size() / 4);
      std::memcpy(tensor_scales_.data(), bytes.data(), bytes.size());
    }
    if (d_.format == Format::kFp8E4M3) {
      IRIS_ASSIGN_OR_RETURN(Fp8Params fp, fp8_params(d_));
      // FP8 scales are at most one per 128 elements in practice (per block), and every row
      // may need any of them: read whole.
      IRIS_TRY(read_whole(Role::kScales, &small_[int(Role::kScales)]));
      s_ = fp8_decode_scales(fp, small_[int(Role::kScales)].data());
    }
    return Status::ok();
  }

  Status decode_rows(uint64_t r0, uint64_t r1, float* out, DecodeScratch& scratch) const override {
    if (check_) IRIS_TRY(check_->run());
    switch (d_.format) {
      case Format::kMxfp4: {
        const uint64_t blocks = (k_ + 31) / 32;
        IRIS_TRY(read_codes(r0 * blocks * 16, (r1 - r0) * blocks * 16, scratch));
        IRIS_TRY(read_slice(Role::kScales, r0 * blocks, (r1 - r0) * blocks, &scratch.aux));
        quant::mxfp4_decode(scratch.codes.data(), scratch.aux.data(), r1 - r0, k_, out);
        return Status::ok();
      }
      case Format::kNf4:
      case Format::kBnbFp4: return decode_bnb4(r0 * k_, r1 * k_, out, scratch);
      case Format::kFp8E4M3: {
        IRIS_TRY(read_codes(r0 * k_, (r1 - r0) * k_, scratch));
        quant::fp8_decode_rows(scratch.codes.data(), r0, r1, n_, k_, s_, out);  // one scale lookup per run of columns
        return Status::ok();
      }
      case Format::kIntGroup: return decode_int_group(r0, r1, out, scratch);
      case Format::kNvfp4: {
        const uint64_t rb = quant::nvfp4_row_bytes(k_), nb = quant::nvfp4_row_scales(k_);
        IRIS_TRY(read_codes(r0 * rb, (r1 - r0) * rb, scratch));
        IRIS_TRY(read_slice(Role::kScales, r0 * nb, (r1 - r0) * nb, &scratch.aux));
        for (uint64_t row = r0; row < r1;) {  // one matrix (one tensor scale) at a time
          const uint64_t m = row / n_, end = std::min(r1, (m + 1) * n_), at = row - r0;
          quant::nvfp4_decode_rows(scratch.codes.data() + at * rb, scratch.aux.data() + at * nb, tensor_scales_[m], end - row, k_, nvfp4_,
                                   out + at * k_);
          row = end;
        }
        return Status::ok();
      }
      default: return internal_error("not a quantized source");
    }
  }

 private:
  // Elements [i0, i1) of a bitsandbytes 4-bit tensor. Decoded in coordinates relative to e0,
  // the start of the group of blocks that shares one nested absmax (or of the first block
  // without double quantization), so that the slices read here index like whole arrays.
  Status decode_bnb4(uint64_t i0, uint64_t i1, float* out, DecodeScratch& scratch) const {
    std::vector<uint8_t>&codes = scratch.codes, &aux = scratch.aux, &nested = scratch.nested;
    const uint64_t group = bnb_.block_size * (bnb_.double_quant ? bnb_.nested_block_size : 1);
    const uint64_t e0 = i0 / group * group;
    const uint64_t b0 = e0 / bnb_.block_size, b1 = (i1 + bnb_.block_size - 1) / bnb_.block_size;
    const uint64_t first = (i0 - e0) & ~uint64_t(1);  // relative element held by byte 0 of the codes read
    IRIS_TRY(read_codes((e0 + first) / 2, (i1 - e0 - first + 1) / 2, scratch));
    ComponentBytes bytes;
    for (Role r : {Role::kCodeTable, Role::kNestedCodeTable}) bytes[int(r)] = small_[int(r)];
    if (bnb_.double_quant) {
      IRIS_TRY(read_slice(Role::kAbsmax, b0, b1 - b0, &aux));
      const uint64_t n0 = b0 / bnb_.nested_block_size, n1 = (b1 + bnb_.nested_block_size - 1) / bnb_.nested_block_size;
      IRIS_TRY(read_slice(Role::kNestedAbsmax, n0 * 4, (n1 - n0) * 4, &nested));
      bytes[int(Role::kNestedAbsmax)] = nested;
    } else {
      IRIS_TRY(read_slice(Role::kAbsmax, b0 * 4, (b1 - b0) * 4, &aux));
    }
    bytes[int(Role::kAbsmax)] = aux;
    const quant::Bnb4bitParams p = bnb4_decode_params(bnb_, bytes);
    quant::bnb4_decode_window(codes.data(), first, i0 - e0, i1 - e0, p, out);
    return Status::ok();
  }

  // Rows [r0, r1) of an int_group tensor (FORMAT.md 4.5), one matrix of the stack at a time.
  Status decode_int_group(uint64_t r0, uint64_t r1, float* out, DecodeScratch& scratch) const {
    const IntGroupParams& p = int_group_;
    const uint64_t row_bytes = (k_ + 7) / 8 * 8 * p.bits / 8, groups = (k_ + p.group_size - 1) / p.group_size;
    const uint64_t es = dtype_bits(p.scale_dtype) / 8;
    IRIS_TRY(read_codes(r0 * row_bytes, (r1 - r0) * row_bytes, scratch));
    IRIS_TRY(read_slice(Role::kScales, r0 * groups * es, (r1 - r0) * groups * es, &scratch.aux));
    if (p.zero_points) IRIS_TRY(read_slice(Role::kZeroPoints, r0 * groups, (r1 - r0) * groups, &scratch.nested));
    for (uint64_t row = r0; row < r1;) {
      const uint64_t m = row / n_, end = std::min(r1, (m + 1) * n_), at = row - r0;
      quant::IntGroupStored st{scratch.codes.data() + at * row_bytes, row_bytes, scratch.aux.data() + at * groups * es,
                               p.zero_points ? scratch.nested.data() + at * groups : nullptr, p.act_order ? perm_.data() + m * k_ : nullptr,
                               p.bits, end - row, k_, p.group_size, groups, p.scale_dtype, p.post_factor};
      quant::int_group_decode_stored(st, out + at * k_);
      row = end;
    }
    return Status::ok();
  }

  // Bytes [offset, offset + n) of a component, bounds-checked against the file's tensor.
  Status read_slice(Role role, uint64_t offset, uint64_t n, std::vector<uint8_t>* out) const {
    const SnapshotTensor& t = refs_[int(role)];
    if (!t.tensor) return invalid_input("tensor '" + d_.name + "': no " + std::string(role_name(role)) + " component");
    if (offset > t.tensor->size || n > t.tensor->size - offset)
      return invalid_input("tensor '" + d_.name + "': its " + std::string(role_name(role)) + " component holds " +
                           std::to_string(t.tensor->size) + " bytes, fewer than its shape needs");
    out->resize(n);
    // the bytes the ranges kReadAhead on will read, asked for now (the first range: all of them)
    const uint64_t at = t.tensor->offset + offset;
    t.file->mapping().will_need(offset == 0 ? at : at + MappedFile::kReadAhead, offset == 0 ? MappedFile::kReadAhead + n : n);
    return t.file->mapping().read_at(t.tensor->offset + offset, out->data(), n);
  }
  // Bytes [offset, offset + n) of the codes in row-major order into scratch.codes, untiled
  // where an archive source stores them tiled.
  Status read_codes(uint64_t offset, uint64_t n, DecodeScratch& scratch) const {
    if (!tiled_codes_) return read_slice(Role::kCodes, offset, n, &scratch.codes);
    scratch.codes.resize(n);
    return read_tiled_codes(*tiled_codes_, offset, n, scratch.codes.data(), scratch.tiled);
  }
  Status read_whole(Role role, std::vector<uint8_t>* out) const {
    return read_slice(role, 0, refs_[int(role)].tensor ? refs_[int(role)].tensor->size : 0, out);
  }

  TensorDesc d_;
  std::shared_ptr<CheckOnce> check_;  // an archive source's checksums, shared with its tensor
  std::optional<SourcePart> tiled_codes_;
  std::array<SnapshotTensor, kRoleCount> refs_{};
  std::array<std::vector<uint8_t>, kRoleCount> small_;
  uint64_t n_ = 1;
  Bnb4Params bnb_;
  quant::Fp8Scales s_;
  IntGroupParams int_group_;
  std::vector<uint32_t> perm_;  // int_group with act_order: every matrix's
  quant::Nvfp4Convention nvfp4_;
  std::vector<float> tensor_scales_;  // nvfp4: one a matrix
};

}  // namespace

Result<std::unique_ptr<SourceDecoder>> SourceDecoder::create(const SourceTensor& s) {
  if (s.packed) return make_packed_integer_decoder(s);
  if (s.desc.format == Format::kRaw) {
    if (!is_float_dtype(s.desc.dtype))
      return unsupported("tensor '" + s.desc.name + "': " + std::string(dtype_archive_name(s.desc.dtype)) + " values cannot be quantized");
    auto d = std::make_unique<RawDecoder>(s);
    IRIS_TRY(d->init(s.desc));
    return std::unique_ptr<SourceDecoder>(std::move(d));
  }
  auto d = std::make_unique<QuantizedDecoder>();
  IRIS_TRY(d->init(s));
  return std::unique_ptr<SourceDecoder>(std::move(d));
}

}  // namespace iris
