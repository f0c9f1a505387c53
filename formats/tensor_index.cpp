#include "formats/tensor_index.h"

namespace iris {

bool TensorIndex::build(const std::vector<ArchiveTensor>& tensors) {
  // A manifest is at most kMaxManifestSize bytes, so its tensors are far fewer than 2^32 - 1;
  // a list that long could not be indexed, and is refused as a repeated name would be.
  if (tensors.size() >= UINT32_MAX) return false;
  index_ = NameIndex<Names>(Names{&tensors});
  index_.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (index_.insert(i) != index_.npos) return false;
  return true;
}

std::optional<size_t> TensorIndex::find(const std::vector<ArchiveTensor>& tensors, std::string_view name) const {
  const size_t i = index_.find(name, Names{&tensors});
  return i == index_.npos ? std::nullopt : std::optional<size_t>(i);
}

}  // namespace iris
