#include "formats/tensor_index.h"

#include <bit>
#include <functional>

namespace iris {

namespace {

uint64_t hash_of(std::string_view name) { return std::hash<std::string_view>{}(name); }

}  // namespace

bool TensorIndex::build(const std::vector<ArchiveTensor>& tensors) {
  // A manifest is at most kMaxManifestSize bytes, so its tensors are far fewer than 2^32 - 1;
  // a list that long could not be indexed, and is refused as a repeated name would be.
  if (tensors.size() >= UINT32_MAX) return false;
  // At most half full: a lookup probes about 1.5 slots.
  slots_.assign(std::bit_ceil(std::max<size_t>(8, tensors.size() * 2)), 0);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string_view name = tensors[i].desc.name;
    const uint64_t h = hash_of(name);
    const uint64_t tag = h >> 32 << 32;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
      const uint64_t slot = slots_[s];
      if (slot == 0) {
        slots_[s] = tag | (i + 1);
        break;
      }
      if ((slot >> 32 << 32) == tag && tensors[(slot & UINT32_MAX) - 1].desc.name == name) return false;
    }
  }
  return true;
}

std::optional<size_t> TensorIndex::find(const std::vector<ArchiveTensor>& tensors, std::string_view name) const {
  if (slots_.empty()) return std::nullopt;
  const size_t mask = slots_.size() - 1;
  const uint64_t h = hash_of(name);
  const uint64_t tag = h >> 32 << 32;
  for (size_t s = h & mask;; s = (s + 1) & mask) {
    const uint64_t slot = slots_[s];
    if (slot == 0) return std::nullopt;
    const size_t i = (slot & UINT32_MAX) - 1;
    if ((slot >> 32 << 32) == tag && i < tensors.size() && tensors[i].desc.name == name) return i;
  }
}

}  // namespace iris
