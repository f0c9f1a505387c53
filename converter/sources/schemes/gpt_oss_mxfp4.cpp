// gpt-oss MXFP4 (FORMATS.md 2.4): X_blocks U8 [..., N, K/32, 16] + X_scales U8/F8_E8M0
// [..., N, K/32] -> X, E2M1 codes with E8M0 scales per 32 elements.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

namespace iris::schemes {

// (Named, not anonymous: unity builds join these files.)
namespace gpt_oss_mxfp4 {

using nlohmann::json;

Result<SourceTensor> group_mxfp4(const Snapshot& snap, const std::string& base, const SnapshotTensor& blocks,
                                 const SnapshotTensor& scales) {
  const auto& b = *blocks.tensor;
  const auto& s = *scales.tensor;
  if (b.dtype != DType::kU8) return invalid_input(where(blocks) + "MXFP4 blocks must be U8, not " + std::string(dtype_st_name(b.dtype)));
  if (s.dtype != DType::kU8 && s.dtype != DType::kF8_E8M0)
    return invalid_input(where(scales) + "MXFP4 scales must be U8 or F8_E8M0, not " + std::string(dtype_st_name(s.dtype)));
  if (b.shape.size() < 3 || b.shape.back() != 16)
    return invalid_input(where(blocks) + "MXFP4 blocks shape " + shape_str(b.shape) + " is not [..., N, K/32, 16]");
  std::vector<uint64_t> expect_scales(b.shape.begin(), b.shape.end() - 1);
  if (s.shape != expect_scales)
    return invalid_input(where(scales) + "shape " + shape_str(s.shape) + " does not match blocks " + shape_str(b.shape) +
                         " (expected " + shape_str(expect_scales) + ")");
  SourceTensor t;
  t.desc.name = base;
  t.desc.shape.assign(b.shape.begin(), b.shape.end() - 2);
  t.desc.shape.push_back(b.shape[b.shape.size() - 2] * 32);
  t.desc.dtype = logical_float_dtype(snap);
  t.desc.format = Format::kMxfp4;
  t.desc.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  t.parts = {{Role::kCodes, blocks}, {Role::kScales, scales}};
  return t;
}

std::string group_of(const Snapshot&, const std::string& name) {
  return name.ends_with("_blocks") ? name.substr(0, name.size() - 7) : "";
}

Result<SourceTensor> group(const Snapshot& snap, const SnapshotTensor& blocks, const std::string& base, const GroupingOptions&) {
  const SnapshotTensor* scales = snap.find(base + "_scales");
  if (!scales) return invalid_input(where(blocks) + "MXFP4 blocks without their '" + base + "_scales' companion");
  return group_mxfp4(snap, base, blocks, *scales);
}

Status check_unclaimed(const Snapshot& snap, const SnapshotTensor& st, const GroupingOptions&) {
  const std::string& name = st.tensor->name;
  if (name.ends_with("_scales") && snap.find(name.substr(0, name.size() - 7) + "_blocks") == nullptr && st.tensor->dtype == DType::kU8)
    return invalid_input(where(st) + "MXFP4 scales without their '" + name.substr(0, name.size() - 7) + "_blocks' companion");
  return Status::ok();
}

}  // namespace gpt_oss_mxfp4

const CheckpointScheme kGptOssMxfp4{"gpt-oss MXFP4", {"mxfp4"}, {"_blocks", "_scales"}, true, gpt_oss_mxfp4::group_of, gpt_oss_mxfp4::group, gpt_oss_mxfp4::check_unclaimed};

}  // namespace iris::schemes
