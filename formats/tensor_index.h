// An archive's tensors by name: common/name_index.h's open-addressing table of positions in
// the tensor list, built once the list no longer changes. No allocation per name and no copy
// of a name: a node-based map of 36k names cost a tenth of an archive's open and close, and
// building it is also the check that no name is listed twice (issue 24 item 5).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/name_index.h"
#include "formats/manifest.h"

namespace iris {

class TensorIndex {
 public:
  // Indexes `tensors` by desc.name; false when a name is listed twice.
  bool build(const std::vector<ArchiveTensor>& tensors);
  // The position of `name` in `tensors`, the list the index was built from (or its move).
  std::optional<size_t> find(const std::vector<ArchiveTensor>& tensors, std::string_view name) const;

 private:
  struct Names {
    const std::vector<ArchiveTensor>* tensors = nullptr;
    std::string_view operator()(size_t i) const { return (*tensors)[i].desc.name; }
  };
  NameIndex<Names> index_;
};

}  // namespace iris
