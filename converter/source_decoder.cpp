#include "converter/source_decoder.h"

#include <array>

#include <cstring>

#include "common/float_bits.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "quant/tables.h"
#include "formats/tensor_decode.h"

namespace iris {


namespace {

std::vector<uint8_t> read_all(const SnapshotTensor& t, Status* s) {
  std::vector<uint8_t> v(t.tensor->size);
  *s = t.file->mapping().read_at(t.tensor->offset, v.data(), v.size());
  return v;
}

class RawDecoder final : public SourceDecoder {
 public:
  explicit RawDecoder(const SourceTensor& s) : t_(s.parts[0].ref) {}
  Status init(const TensorDesc& d) {
    k_ = d.shape.empty() ? 1 : d.shape.back();
    uint64_t numel = 1;
    for (auto x : d.shape) numel *= x;
    rows_ = k_ ? numel / k_ : 0;
    es_ = dtype_bits(d.dtype) / 8;
    return Status::ok();
  }
  Status decode_rows(uint64_t r0, uint64_t r1, float* out) const override {
    // One buffer for every call of every decoder: a fresh one per chunk costs a zero fill
    // and page faults. Tensors are decoded one at a time.
    static std::vector<uint8_t> buf;
    if (buf.size() < (r1 - r0) * k_ * es_) buf.resize((r1 - r0) * k_ * es_);
    IRIS_TRY(t_.file->mapping().read_at(t_.tensor->offset + r0 * k_ * es_, buf.data(), (r1 - r0) * k_ * es_));
    const int64_t n = int64_t((r1 - r0) * k_);
    // One loop per dtype (no per-element switch), in parallel: this runs over every value.
    switch (t_.tensor->dtype) {
      case DType::kBF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(buf.data());
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
        break;
      }
      case DType::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(buf.data());
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
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
  SnapshotTensor t_;
  uint64_t es_ = 2;
};

// Quantized sources are compact: their components are read whole, then decoded per row range.
class QuantizedDecoder final : public SourceDecoder {
 public:
  Status init(const SourceTensor& s) {
    d_ = s.desc;
    for (const auto& p : s.parts) {
      Status st;
      comps_[int(p.role)] = read_all(p.ref, &st);
      IRIS_TRY(st);
    }
    k_ = d_.shape.back();
    uint64_t numel = 1;
    for (auto x : d_.shape) numel *= x;
    rows_ = numel / k_;
    n_ = d_.shape.size() >= 2 ? d_.shape[d_.shape.size() - 2] : 1;
    ComponentBytes bytes;
    for (int r = 0; r < kRoleCount; ++r) bytes[r] = comps_[r];
    // The grouped descriptor's parameters are checked before any decoder divides by them.
    if (d_.format == Format::kMxfp4) IRIS_TRY(mxfp4_params(d_).status());
    if (d_.format == Format::kNf4 || d_.format == Format::kBnbFp4) {
      IRIS_ASSIGN_OR_RETURN(Bnb4Params bp, bnb4_params(d_));
      p_ = bnb4_decode_params(bp, bytes);
    }
    if (d_.format == Format::kFp8E4M3) {
      IRIS_ASSIGN_OR_RETURN(Fp8Params fp, fp8_params(d_));
      s_ = fp8_decode_scales(fp, comps_[int(Role::kScales)].data());
    }
    return Status::ok();
  }

  Status decode_rows(uint64_t r0, uint64_t r1, float* out) const override {
    switch (d_.format) {
      case Format::kMxfp4: {
        const uint64_t blocks = (k_ + 31) / 32;
        quant::mxfp4_decode(comps_[int(Role::kCodes)].data() + r0 * blocks * 16, comps_[int(Role::kScales)].data() + r0 * blocks, r1 - r0, k_, out);
        return Status::ok();
      }
      case Format::kNf4:
      case Format::kBnbFp4:
        quant::bnb4_decode_ref(comps_[int(Role::kCodes)].data(), r0 * k_, r1 * k_, p_, out);
        return Status::ok();
      case Format::kFp8E4M3: {
        const uint8_t* codes = comps_[int(Role::kCodes)].data();
#pragma omp parallel for schedule(static)
        for (int64_t r = int64_t(r0); r < int64_t(r1); ++r) {
          const uint64_t b = uint64_t(r) / n_, row = uint64_t(r) % n_;
          for (uint64_t c = 0; c < k_; ++c)
            out[(r - r0) * k_ + c] =
                canonical_nan_if_nan(quant::e4m3_to_f32(codes[r * k_ + c]) * quant::fp8_scale_at(s_, n_, k_, b, row, c));
        }
        return Status::ok();
      }
      default: return internal_error("not a quantized source");
    }
  }

 private:
  TensorDesc d_;
  std::array<std::vector<uint8_t>, kRoleCount> comps_;
  uint64_t n_ = 1;
  quant::Bnb4bitParams p_;
  quant::Fp8Scales s_;
};

}  // namespace

Result<std::unique_ptr<SourceDecoder>> SourceDecoder::create(const SourceTensor& s) {
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
