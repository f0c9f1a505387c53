#include "converter/weight_sets.h"

#include "converter/hf/snapshot.h"
#include "converter/hf/source_tensors.h"
#include "converter/source_decoder.h"
#include "formats/iris_archive.h"
#include "formats/iris_preamble.h"
#include "formats/tensor_decode.h"

namespace iris {

std::string storage_name(const TensorDesc& d) {
  return is_quantized(d.format) ? std::string(format_name(d.format)) : std::string(dtype_archive_name(d.dtype));
}

namespace {

bool float_dtype(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32 || d == DType::kF64; }

class ArchiveWeights final : public WeightSet {
 public:
  explicit ArchiveWeights(IrisArchive a) : a_(std::move(a)) {
    for (const auto& t : a_.manifest().tensors) descs_.push_back(t.desc);
  }
  const std::string& path() const override { return a_.path(); }
  const std::vector<TensorDesc>& tensors() const override { return descs_; }
  bool decodable(size_t i) const override { return is_quantized(descs_[i].format) || float_dtype(descs_[i].dtype); }
  Status decode_rows(size_t i, uint64_t r0, uint64_t r1, float* out) const override {
    const ArchiveTensor& t = a_.manifest().tensors[i];
    // Checked as read, like export: comparing corrupted bytes would blame the encoder.
    IRIS_TRY(a_.verify_tensor(t));
    return iris::decode_rows(t.desc, a_.component_bytes(t), r0, r1, DType::kF32, out);
  }

 private:
  IrisArchive a_;
  std::vector<TensorDesc> descs_;
};

class SnapshotWeights final : public WeightSet {
 public:
  static Result<std::unique_ptr<WeightSet>> open(const std::string& src) {
    auto w = std::unique_ptr<SnapshotWeights>(new SnapshotWeights());
    IRIS_ASSIGN_OR_RETURN(Snapshot s, Snapshot::open(src));
    w->snap_ = std::make_unique<Snapshot>(std::move(s));
    IRIS_ASSIGN_OR_RETURN(w->sources_, group_source_tensors(*w->snap_));
    w->path_ = src;
    for (const auto& t : w->sources_) w->descs_.push_back(t.desc);
    return std::unique_ptr<WeightSet>(std::move(w));
  }
  const std::string& path() const override { return path_; }
  const std::vector<TensorDesc>& tensors() const override { return descs_; }
  bool decodable(size_t i) const override { return is_quantized(descs_[i].format) || is_decodable_float(descs_[i].dtype); }
  Status decode_rows(size_t i, uint64_t r0, uint64_t r1, float* out) const override {
    IRIS_ASSIGN_OR_RETURN(auto dec, SourceDecoder::create(sources_[i]));
    return dec->decode_rows(r0, r1, out);
  }

 private:
  SnapshotWeights() = default;
  std::string path_;
  std::unique_ptr<Snapshot> snap_;
  std::vector<SourceTensor> sources_;
  std::vector<TensorDesc> descs_;
};

bool looks_like_archive(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[7] = {};
  const bool ok = std::fread(magic, 1, 7, f) == 7 && std::string(magic, 7) == "IRISMDL";
  std::fclose(f);
  return ok;
}

}  // namespace

Result<std::unique_ptr<WeightSet>> WeightSet::open(const std::string& src) {
  if (looks_like_archive(src)) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(src));
    return std::unique_ptr<WeightSet>(new ArchiveWeights(std::move(a)));
  }
  return SnapshotWeights::open(src);
}

}  // namespace iris
