#include "converter/pipeline/merge.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "common/hashing.h"
#include "converter/pipeline/output_guard.h"
#include "converter/pipeline/parts.h"
#include "converter/pipeline/producers.h"
#include "formats/iris_archive.h"

namespace iris {

namespace {

// Passes bytes on and hashes them, so that a part's component is checked in the one read
// that copies it.
class HashingSink : public ByteSink {
 public:
  explicit HashingSink(ByteSink& to) : to_(to) {}
  Status write(std::span<const uint8_t> bytes) override {
    hash_.update(bytes.data(), bytes.size());
    return to_.write(bytes);
  }
  std::span<uint8_t> room(uint64_t max) override { return to_.room(max); }
  Status commit(std::span<const uint8_t> filled) override {
    hash_.update(filled.data(), filled.size());
    return to_.commit(filled);
  }
  uint64_t digest() const { return hash_.digest(); }

 private:
  ByteSink& to_;
  StreamingHash hash_;
};

ComponentProducer checked_copy(const IrisArchive& part, const StoredComponent& c, std::string what) {
  ComponentProducer copy = copy_producer(part.mapping(c), part.absolute_offset(c), c.spec.bytes);
  return [copy = std::move(copy), expect = c.xxh3, what = std::move(what)](ByteSink& sink) -> Status {
    HashingSink hashing(sink);
    IRIS_TRY(copy(hashing));
    if (hashing.digest() != expect) return corrupt_data(what + ": checksum mismatch (the part is corrupt)");
    return Status::ok();
  };
}

struct OpenPart {
  IrisArchive archive;
  PartRecord record;
};

}  // namespace

Result<MergeReport> run_merge(const MergeOptions& o) { return merge_parts(o, nullptr); }

Result<MergeReport> merge_parts(const MergeOptions& o, const MergeTarget* target) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.parts.empty()) return usage_error("merge: no parts given");
  IRIS_TRY(refuse_input_as_output(o.output, o.parts, "output"));
  std::vector<OpenPart> parts;
  parts.reserve(o.parts.size());
  for (const auto& path : o.parts) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(path));
    IRIS_ASSIGN_OR_RETURN(PartRecord r, PartRecord::from_json(a.manifest().part, path));
    if (a.manifest().tensors.size() != r.tensors)
      return invalid_input(path + ": part " + r.spec.text() + " holds " + std::to_string(a.manifest().tensors.size()) +
                           " tensors, its record says " + std::to_string(r.tensors));
    parts.push_back({std::move(a), r});
  }
  // One conversion: the same plan and part count as the first file given.
  const OpenPart& ref = parts.front();
  for (const auto& p : parts) {
    if (p.record.plan != ref.record.plan || p.record.spec.count != ref.record.spec.count ||
        p.record.total_tensors != ref.record.total_tensors || p.record.manifest_reserve != ref.record.manifest_reserve)
      return invalid_input(p.archive.path() + ": part " + p.record.spec.text() + " of another conversion than " + ref.archive.path() +
                           " (part " + ref.record.spec.text() + "): plan " + hash_hex(p.record.plan) + " against " +
                           hash_hex(ref.record.plan) + " (a different source, options or iris version)");
  }
  std::map<uint32_t, const OpenPart*> by_index;
  for (const auto& p : parts) {
    auto [it, fresh] = by_index.emplace(p.record.spec.index, &p);
    if (!fresh)
      return invalid_input(it->second->archive.path() + " and " + p.archive.path() + " are both part " + p.record.spec.text());
  }
  const uint32_t count = ref.record.spec.count;
  std::string missing;
  for (uint32_t i = 1; i <= count && missing.size() < 200; ++i)
    if (!by_index.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(count);
  if (!missing.empty()) return invalid_input("merge: part " + missing + " missing (" + std::to_string(parts.size()) + " of " +
                                             std::to_string(count) + " given)");
  const uint64_t first = target ? target->first_tensor : 0;
  const uint64_t want = target ? target->tensors : ref.record.total_tensors;
  uint64_t next = first;
  for (const auto& [i, p] : by_index) {
    if (p->record.first_tensor != next)
      return invalid_input(p->archive.path() + ": part " + p->record.spec.text() + " starts at tensor " +
                           std::to_string(p->record.first_tensor) + ", the parts before it end at " + std::to_string(next));
    next += p->record.tensors;
  }
  if (next - first != want)
    return invalid_input("merge: the parts hold " + std::to_string(next - first) + " tensors of the " + std::to_string(want) +
                         (target ? " to join" : " of the conversion"));
  // What every part carries alike (the plan covers it; checked, so that no file is trusted blindly).
  const Manifest& rm = ref.archive.manifest();
  for (const auto& p : parts) {
    const Manifest& m = p.archive.manifest();
    bool same = m.model_type == rm.model_type && m.tool == rm.tool && m.provenance == rm.provenance && m.files.size() == rm.files.size();
    for (size_t f = 0; same && f < m.files.size(); ++f)
      same = m.files[f].name == rm.files[f].name && m.files[f].xxh3 == rm.files[f].xxh3 && m.files[f].encoding == rm.files[f].encoding;
    if (!same)
      return invalid_input(p.archive.path() + ": part " + p.record.spec.text() + " differs from " + ref.archive.path() +
                           " in its model type, tool, provenance or embedded files");
    for (const auto& f : m.files) IRIS_TRY(p.archive.verify_file(f));  // small: every part's, so that no corrupt part passes
  }

  IrisWriter writer;
  writer.set_model_type(rm.model_type);
  writer.set_tool(rm.tool);
  writer.set_provenance(rm.provenance);
  writer.reserve_manifest(target ? target->manifest_reserve : ref.record.manifest_reserve);
  if (target) writer.set_part(target->part);
  size_t tensors = 0;
  for (const auto& [i, p] : by_index) {
    for (const auto& t : p->archive.manifest().tensors) {
      std::vector<ComponentProducer> producers;
      for (const auto& c : t.components)
        producers.push_back(checked_copy(p->archive, c, p->archive.path() + ": tensor '" + t.desc.name + "'"));
      writer.add_tensor(t.desc, t.source.json(), std::move(producers), ProducerCost::kCopy);
      ++tensors;
    }
  }
  for (const auto& f : rm.files) {
    const auto bytes = ref.archive.bytes(f);
    writer.add_stored_file(f, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  WriteOptions wo;
  wo.overwrite = o.overwrite;
  wo.progress = o.progress;
  wo.partial_files = o.partial_files;
  wo.direct_io = o.direct_io;
  MergeReport report;
  if (o.max_file_size && target) return internal_error("merge: a set from the segments of a part");
  if (o.max_file_size) {
    // The set a conversion with --max-file-size writes: identified by the same plan.
    IRIS_ASSIGN_OR_RETURN(report.written, writer.write_set(o.output, o.max_file_size, ref.record.plan, wo));
  } else {
    IRIS_ASSIGN_OR_RETURN(report.written, writer.write(o.output, wo));
  }
  report.parts = parts.size();
  report.tensors = tensors;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace iris
