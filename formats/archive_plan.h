// What an archive will be, worked out one tensor at a time and keeping nothing of a tensor but
// its size: the data section's placement, the manifest's length as planned and as final.
// IrisWriter::planned() runs it (formats/iris_writer.h); it is the dry run.
//
// Why not the writer's own layout (a Manifest of every tensor, dumped): a dry run of 10^6
// tensors held each descriptor and source record twice, 4 GB, and built each entry's JSON to
// measure it (issue 24 item 10). Tests pin every figure to what write() then writes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/iris_writer.h"
#include "formats/manifest.h"

namespace iris {

// Brings tensor `t`'s planned entry to its final form with `late` (formats/iris_writer.h,
// LateDesc), refusing a final descriptor that would move a component. The first component is
// taken as written.
Status apply_late_desc(const LateDesc& late, ArchiveTensor& t);

class ArchivePlan {
 public:
  // The next tensor, in file order: placed, its entry measured, its late descriptor applied
  // (which may do a pass over its values), then let go. `t` has no components yet. Its source
  // record is t.source, or what `source_text` writes (SourceRecordMaker::text) when given: a
  // tensor with a late descriptor, which may change the record, needs t.source.
  Status add(ArchiveTensor t, size_t producers, const LateDesc& late, const std::function<void(std::string&, int)>& source_text = nullptr);
  // After the last tensor: the sizes write() would produce, with the embedded files (as
  // stored: compressed, not yet placed) placed after the tensors. `header` gives the
  // manifest's fields other than its tensors and files.
  Result<WriteSummary> finish(const Manifest& header, const std::vector<StoredFile>& files) const;

 private:
  uint64_t place(uint64_t bytes);

  uint64_t cursor_ = 0;
  uint64_t planned_end_ = 0;  // the end of the last non-empty range, as planned
  uint64_t final_end_ = 0;    // the same with the late descriptors' final sizes
  uint64_t planned_text_ = 0, final_text_ = 0;  // the tensors' entries, as in the manifest
  uint64_t room_ = 0;                           // the late descriptors' manifest room
  // Empty components placed after the last non-empty range: the writer moves those past the
  // end back into the data section, which changes their offsets' digits (write() places
  // them with place_empty_ranges()).
  std::vector<uint64_t> trailing_empty_;
  std::vector<uint64_t> tensor_bytes_;
  std::string text_;  // scratch for one entry
};

}  // namespace iris
