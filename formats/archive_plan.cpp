#include "formats/archive_plan.h"

#include <algorithm>

#include "common/checked_math.h"
#include "formats/iris_preamble.h"
#include "formats/manifest_entry_text.h"

namespace iris {

Status apply_late_desc(const LateDesc& late, ArchiveTensor& t) {
  if (!late.finish) return Status::ok();
  TensorDesc desc = t.desc;
  nlohmann::json source = t.source.json();
  IRIS_TRY(late.finish(desc, source));
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(desc));
  const std::string what = "tensor '" + t.desc.name + "': its final descriptor ";
  if (desc.name != t.desc.name || desc.shape != t.desc.shape || desc.format != t.desc.format || desc.layout.kind != t.desc.layout.kind ||
      specs.size() != t.components.size())
    return internal_error(what + "changed more than its parameters");
  for (size_t c = 0; c < specs.size(); ++c) {
    const auto& was = t.components[c].spec;
    const uint64_t pages_end = round_up(t.components[c].offset + was.bytes, kIrisAlignment);
    const bool same_kind = specs[c].role == was.role && specs[c].dtype == was.dtype;
    const bool fits = c > 0 ? was.bytes && specs[c].bytes && round_up(t.components[c].offset + specs[c].bytes, kIrisAlignment) == pages_end
                            : specs[c].bytes == was.bytes;  // the first: already written
    if (!same_kind || (specs[c].bytes != was.bytes && !fits))
      return internal_error(what + "moves component " + std::to_string(c) + " (" + std::to_string(was.bytes) + " -> " +
                            std::to_string(specs[c].bytes) + " bytes)");
  }
  for (size_t c = 0; c < specs.size(); ++c) t.components[c].spec = specs[c];
  t.desc = std::move(desc);
  t.source = std::move(source);
  return Status::ok();
}

namespace {

// Where the writer moves an empty range that lies past the data section's end (an empty
// tensor last): the section's last aligned offset (iris_writer.cpp, place_empty_ranges).
uint64_t kept_inside(uint64_t offset, uint64_t data_end) { return offset > data_end ? data_end / kIrisAlignment * kIrisAlignment : offset; }

uint64_t digits(uint64_t v) {
  uint64_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// The length of manifest_to_json(m).dump(1) for `base` (no tensors) with tensors whose
// entries, as dump(1) writes them two levels deep plus their indent and separator, add up to
// `entries`: the list "[]" becomes "[\n", the entries, "\n ]" (manifest.cpp, manifest_text_size).
uint64_t manifest_length(const Manifest& base, uint64_t entries, size_t count) {
  const uint64_t size = manifest_text_size(base);
  return count ? size - 2 + entries + 3 : size;
}

}  // namespace

uint64_t ArchivePlan::place(uint64_t bytes) {
  const uint64_t off = cursor_;
  if (bytes) {
    cursor_ = round_up(off + bytes, kIrisAlignment);
    planned_end_ = off + bytes;
    trailing_empty_.clear();
  }
  return off;
}

Status ArchivePlan::add(ArchiveTensor t, size_t producers, const LateDesc& late, const std::function<void(std::string&, int)>& source_text) {
  if (source_text && late.finish) return internal_error("tensor '" + t.desc.name + "': a late descriptor needs its source record as JSON");
  auto specs = component_specs(t.desc);
  if (!specs.is_ok()) return specs.status();
  if (specs->size() != producers)
    return internal_error("tensor '" + t.desc.name + "': " + std::to_string(producers) + " producers for " + std::to_string(specs->size()) +
                          " components");
  t.components.clear();
  for (auto& s : *specs) {
    const uint64_t at = place(s.bytes);
    if (!s.bytes) trailing_empty_.push_back(at);
    t.components.push_back({std::move(s), at, 0});
  }
  // Each entry two levels deep in the manifest, after its indent ("  ") and before ",\n".
  text_.clear();
  if (source_text) append_tensor_entry_text(text_, t.desc, t.components, source_text, 2);
  else append_tensor_entry_text(text_, t.desc, t.components, t.source.json(), 2);
  planned_text_ += text_.size() + 4;
  room_ += late.manifest_room;
  if (late.finish) {
    IRIS_TRY(apply_late_desc(late, t));
    text_.clear();
    append_tensor_entry_text(text_, t.desc, t.components, t.source.json(), 2);
  }
  final_text_ += text_.size() + 4;
  uint64_t bytes = 0;
  for (const auto& c : t.components) {
    bytes += c.spec.bytes;
    if (c.spec.bytes) final_end_ = std::max(final_end_, c.offset + c.spec.bytes);
  }
  tensor_bytes_.push_back(bytes);
  return Status::ok();
}

Result<WriteSummary> ArchivePlan::finish(const Manifest& header, const std::vector<StoredFile>& files) const {
  ArchivePlan p = *this;  // the files' placement, on a copy: finish() may be asked again
  Manifest planned, final;
  for (Manifest* m : {&planned, &final}) {
    m->alignment = header.alignment;
    m->model_type = header.model_type;
    m->tool = header.tool;
    m->provenance = header.provenance;
  }
  for (StoredFile f : files) {
    f.offset = p.place(f.size);
    if (f.size) p.final_end_ = std::max(p.final_end_, f.offset + f.size);
    planned.files.push_back(f);
  }
  // Empty ranges past the end move inside, in the planned manifest and again (from where they
  // then are) in the final one, whose section may end elsewhere.
  const uint64_t planned_end = p.planned_end_, final_end = p.final_end_;
  uint64_t planned_text = p.planned_text_, final_text = p.final_text_;
  for (uint64_t at : p.trailing_empty_) {
    const uint64_t in_planned = kept_inside(at, planned_end), in_final = kept_inside(in_planned, final_end);
    planned_text = planned_text + digits(in_planned) - digits(at);
    final_text = final_text + digits(in_final) - digits(at);
  }
  final.files = planned.files;
  for (size_t i = 0; i < planned.files.size(); ++i) {
    if (planned.files[i].size) continue;
    planned.files[i].offset = kept_inside(planned.files[i].offset, planned_end);
    final.files[i].offset = kept_inside(planned.files[i].offset, final_end);
  }
  const size_t n = p.tensor_bytes_.size();
  const uint64_t manifest_room = manifest_length(planned, planned_text, n) + p.room_;
  const uint64_t data_offset = round_up(kPreambleSize + manifest_room, kIrisAlignment);
  WriteSummary w{data_offset + final_end, final_end, manifest_length(final, final_text, n)};
  w.tensor_bytes = p.tensor_bytes_;
  return w;
}

}  // namespace iris
