// IrisWriter::write_set: an archive as a set of member files and an index (FORMAT.md section 10).
#include <algorithm>
#include <filesystem>

#include "common/checked_math.h"
#include "formats/archive_set.h"
#include "formats/iris_archive.h"
#include "formats/iris_preamble.h"
#include "formats/iris_writer.h"

namespace iris {

namespace {
// Each member's partial file stays open until all are written (nothing is named before the
// set is complete): this bounds the descriptors a set takes, far under the usual 1024.
constexpr size_t kMaxWrittenMembers = 512;
}  // namespace

Result<WriteSummary> IrisWriter::write_set(const std::string& index_path, uint64_t max_file_size, uint64_t id,
                                           const WriteOptions& options) {
  if (plan_) return internal_error(index_path + ": this writer only plans (IrisWriter::Mode::kPlan)");
  // The whole archive's manifest room bounds every member's: a member lists a subset of the
  // tensors and no embedded files, plus its record.
  IRIS_ASSIGN_OR_RETURN(const uint64_t whole_reserve, manifest_reservation());
  const uint64_t member_reserve = whole_reserve + kSetMemberRecordRoom;
  const uint64_t header = round_up(kPreambleSize + member_reserve, kIrisAlignment);
  std::vector<std::vector<uint64_t>> sizes;
  std::vector<std::string> names;
  uint64_t total = 0;
  for (const auto& p : pending_) {
    IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(p.desc));
    std::vector<uint64_t> b;
    for (const auto& c : specs) {
      b.push_back(c.bytes);
      total += c.bytes;
    }
    sizes.push_back(std::move(b));
    names.push_back(p.desc.name);
  }
  auto runs = plan_set_members(sizes, names, header, max_file_size);
  if (!runs.is_ok()) return invalid_input(index_path + ": " + runs.status().message());
  const uint32_t count = uint32_t(runs->size());
  if (count > kMaxWrittenMembers)
    return invalid_input(index_path + ": the set would take " + std::to_string(count) + " member files; iris writes at most " +
                         std::to_string(kMaxWrittenMembers) + " (a larger file size limit makes fewer)");
  const std::filesystem::path folder = std::filesystem::path(index_path).parent_path();
  std::vector<std::string> paths;
  for (uint32_t i = 0; i < count; ++i) {
    paths.push_back((folder / set_member_name(index_path, i + 1, count)).string());
    if (paths.back() == index_path) return invalid_input(index_path + ": the index would be its own member file");
  }
  // Refused before anything is written: a file that exists (unless overwriting), or cannot be made.
  for (const auto& p : paths) IRIS_TRY(AtomicOutputFile::destination(p, options.overwrite, /*in_order=*/false).status());
  IRIS_TRY(AtomicOutputFile::destination(index_path, options.overwrite, /*in_order=*/false).status());

  std::vector<AtomicOutputFile> held;
  held.reserve(count + 1);
  WriteSummary out;
  SetRecord set;
  set.id = id;
  set.tensors = pending_.size();
  uint64_t done_before = 0;
  std::vector<Pending> tensors = std::move(pending_);
  pending_.clear();
  for (uint32_t i = 0; i < count; ++i) {
    const auto [first, end] = (*runs)[i];
    IrisWriter member;
    member.manifest_.model_type = manifest_.model_type;
    member.manifest_.tool = manifest_.tool;
    member.manifest_.provenance = manifest_.provenance;
    SetMemberRecord record{id, i + 1, count, first, end - first, tensors.size()};
    member.manifest_.set_member = record.to_json();
    member.reserve_manifest(member_reserve);
    for (size_t t = first; t < end; ++t) member.pending_.push_back(std::move(tensors[t]));
    WriteOptions mo = options;
    mo.before_commit = nullptr;
    mo.held = &held;
    if (options.progress)
      mo.progress = [&options, done_before, total](uint64_t done, uint64_t) { options.progress(done_before + done, total); };
    IRIS_ASSIGN_OR_RETURN(WriteSummary w, member.write(paths[i], mo));
    uint64_t member_bytes = 0;
    for (uint64_t b : w.tensor_bytes) member_bytes += b;
    done_before += member_bytes;
    set.files.push_back({std::filesystem::path(paths[i]).filename().string(), w.file_bytes, w.manifest_xxh3, first, end - first});
    out.file_bytes += w.file_bytes;
    out.data_bytes += w.data_bytes;
    out.manifest_bytes += w.manifest_bytes;
    out.tensor_bytes.insert(out.tensor_bytes.end(), w.tensor_bytes.begin(), w.tensor_bytes.end());
    out.set_files.push_back({paths[i], w.file_bytes});
  }

  IrisWriter index;
  index.manifest_.model_type = manifest_.model_type;
  index.manifest_.tool = manifest_.tool;
  index.manifest_.provenance = manifest_.provenance;
  index.manifest_.set = set.to_json();
  index.files_ = std::move(files_);
  index.stored_ = std::move(stored_);
  WriteOptions io = options;
  io.before_commit = nullptr;
  io.held = &held;
  io.progress = nullptr;
  IRIS_ASSIGN_OR_RETURN(WriteSummary w, index.write(index_path, io));
  out.file_bytes += w.file_bytes;
  out.data_bytes += w.data_bytes;
  out.manifest_bytes += w.manifest_bytes;
  out.manifest_xxh3 = w.manifest_xxh3;
  out.set_files.push_back({index_path, w.file_bytes});
  if (options.before_commit) IRIS_TRY(options.before_commit(out));
  // An index being replaced (--force) may list members this set does not write (another
  // count): they go with it, once the new set is in place.
  std::vector<std::string> stale;
  if (options.overwrite)
    if (auto old = set_member_paths(index_path); old.is_ok())
      for (const auto& p : *old)
        if (std::find(paths.begin(), paths.end(), p) == paths.end()) stale.push_back(p);
  // The members first, the index last: a reader never finds an index without its members. A
  // commit that fails takes back the files this call already named.
  std::vector<std::string> named = paths;
  named.push_back(index_path);
  for (size_t i = 0; i < held.size(); ++i) {
    if (Status st = held[i].commit(); !st.is_ok()) {
      std::error_code ec;
      for (size_t j = 0; j < i; ++j) std::filesystem::remove(named[j], ec);
      return st;
    }
  }
  for (const auto& p : stale) {
    std::error_code ec;
    std::filesystem::remove(p, ec);
  }
  return out;
}

}  // namespace iris
