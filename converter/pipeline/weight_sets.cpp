#include "converter/pipeline/weight_sets.h"

#include <optional>

#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "converter/sources/source_decoder.h"
#include "formats/iris_archive.h"
#include "formats/tensor_decode.h"

namespace iris {

namespace {

class ArchiveWeights final : public WeightSet {
 public:
  explicit ArchiveWeights(IrisArchive a) : a_(std::move(a)) {
    for (const auto& t : a_.manifest().tensors) descs_.push_back(t.desc);
    checked_.assign(descs_.size(), std::nullopt);
  }
  const std::string& path() const override { return a_.path(); }
  const std::vector<TensorDesc>& tensors() const override { return descs_; }
  bool decodable(size_t i) const override { return is_quantized(descs_[i].format) || is_float_dtype(descs_[i].dtype); }
  Status decode_rows(size_t i, uint64_t r0, uint64_t r1, float* out) const override {
    const ArchiveTensor& t = a_.manifest().tensors[i];
    // Checked once, on first read, like export: comparing corrupted bytes would blame the encoder.
    if (!checked_[i]) checked_[i] = a_.verify_tensor(t);
    IRIS_TRY(*checked_[i]);
    return iris::decode_rows(t.desc, a_.component_bytes(t), r0, r1, DType::kF32, out);
  }

 private:
  IrisArchive a_;
  std::vector<TensorDesc> descs_;
  mutable std::vector<std::optional<Status>> checked_;  // verify_tensor's result, per tensor
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
  bool decodable(size_t i) const override { return is_quantized(descs_[i].format) || is_float_dtype(descs_[i].dtype); }
  Status decode_rows(size_t i, uint64_t r0, uint64_t r1, float* out) const override {
    // One decoder per tensor, kept while its rows are read in chunks (creating one reads the
    // tensor's companions).
    if (decoder_index_ != i || !decoder_) {
      IRIS_ASSIGN_OR_RETURN(decoder_, SourceDecoder::create(sources_[i]));
      decoder_index_ = i;
    }
    return decoder_->decode_rows(r0, r1, out);
  }

 private:
  SnapshotWeights() = default;
  std::string path_;
  std::unique_ptr<Snapshot> snap_;
  std::vector<SourceTensor> sources_;
  std::vector<TensorDesc> descs_;
  mutable std::unique_ptr<SourceDecoder> decoder_;
  mutable size_t decoder_index_ = 0;
};

}  // namespace

Result<std::unique_ptr<WeightSet>> WeightSet::open(const std::string& src) {
  if (is_iris_archive(src)) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(src));
    return from_archive(std::move(a));
  }
  return SnapshotWeights::open(src);
}

std::unique_ptr<WeightSet> WeightSet::from_archive(IrisArchive archive) {
  return std::unique_ptr<WeightSet>(new ArchiveWeights(std::move(archive)));
}

}  // namespace iris
