#include "converter/pipeline/resume.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/atomic_output.h"
#include "common/hashing.h"
#include "converter/pipeline/convert.h"
#include "converter/pipeline/merge.h"
#include "converter/pipeline/parts.h"
#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "formats/json_text.h"

// The journal folder OUTPUT.resume/ and its states, each left whole by a kill at any point:
//   none                     -> a new run: the folder is made, then journal.json written
//   journal.json (+ segments) -> segments are converted, each committed under its final name
//   journal.json "merging"   -> every segment is whole; the digest of their components is recorded
//   (merge commits OUTPUT)   -> the folder is renamed away (atomically), then removed
// A folder holding nothing but an unfinished journal file is a run killed before its journal
// was written: taken as none. A renamed-away folder (OUTPUT.resume.done-PID) left by a kill is
// removed by the next run.
namespace iris {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kJournal = "journal.json";

std::string segment_name(uint32_t i, uint32_t count) {
  return "segment-" + std::to_string(i) + "-of-" + std::to_string(count) + ".iris";
}

// A committed segment: a part of this plan at this place whose every byte checks.
bool segment_is_whole(const std::string& path, uint64_t plan, PartSpec spec) {
  auto a = IrisArchive::open(path);
  if (!a.is_ok()) return false;
  auto r = PartRecord::from_json(a->manifest().part, path);
  if (!r.is_ok() || r->plan != plan || r->spec.index != spec.index || r->spec.count != spec.count) return false;
  for (const auto& t : a->manifest().tensors)
    if (!a->verify_tensor(t).is_ok()) return false;
  for (const auto& f : a->manifest().files)
    if (!a->verify_file(f).is_ok()) return false;
  return true;
}

// The names and component checksums of an archive's tensors and files, in order: what the
// merge of the segments must hold.
void digest_manifest(const Manifest& m, StreamingHash& h) {
  for (const auto& t : m.tensors) {
    h.update(t.desc.name.data(), t.desc.name.size() + 1);
    for (const auto& c : t.components) h.update(&c.xxh3, sizeof c.xxh3);
  }
}

Result<uint64_t> segments_digest(const std::vector<std::string>& segments) {
  StreamingHash h;
  for (const auto& path : segments) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(path));
    digest_manifest(a.manifest(), h);
  }
  return h.digest();
}

// The archive the merge committed: every byte checks and its tensors are the segments'.
bool output_is_the_merge(const std::string& output, uint64_t digest, const json& part) {
  auto out = IrisArchive::open(output);
  if (!out.is_ok() || out->manifest().part != part) return false;
  StreamingHash h;
  digest_manifest(out->manifest(), h);
  if (h.digest() != digest) return false;
  for (const auto& t : out->manifest().tensors)
    if (!out->verify_tensor(t).is_ok()) return false;
  for (const auto& f : out->manifest().files)
    if (!out->verify_file(f).is_ok()) return false;
  return true;
}

bool only_journal_leftovers(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(std::string(kJournal) + ".partial-", 0) != 0) return false;
  return !ec;
}

// Renamed first, so that a kill leaves either the whole journal or none under its name.
void remove_journal(const fs::path& dir) {
  std::error_code ec;
  const fs::path away = dir.string() + ".done-" + std::to_string(::getpid());
  fs::rename(dir, away, ec);
  fs::remove_all(ec ? dir : away, ec);
}

void remove_renamed_away(const fs::path& dir) {
  std::error_code ec;
  const std::string prefix = dir.filename().string() + ".done-";
  for (fs::directory_iterator it(dir.parent_path().empty() ? "." : dir.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && fs::exists(it->path() / kJournal)) fs::remove_all(it->path(), ec);
  }
}

Status write_journal(const fs::path& dir, const json& j, bool replace, PartialFileRegistry* registry) {
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile f, AtomicOutputFile::create((dir / kJournal).string(), replace, registry));
  const std::string text = dump_json(j, 1) + "\n";  // (a file name need not be UTF-8)
  IRIS_TRY(f.append({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return f.commit();
}

}  // namespace

Result<ConvertReport> run_convert_resumable(const ConvertOptions& o) {
  if (o.dry_run) return usage_error("--resume with --dry-run: a dry run writes nothing to resume");
  if (o.resume_every == 0) return usage_error("--resume-every must be above 0 bytes");
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = o.output + ".resume";
  const std::string where = dir.string();
  std::error_code ec;
  remove_renamed_away(dir);
  if (fs::is_directory(dir, ec) && !fs::exists(dir / kJournal, ec) && only_journal_leftovers(dir)) fs::remove_all(dir, ec);
  const bool journal_exists = fs::exists(dir, ec);
  json was;
  if (journal_exists) {
    std::ifstream in(dir / kJournal);
    if (in) was = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!fs::is_directory(dir, ec) || !was.is_object() || !was.contains("iris_resume_journal"))
      return usage_error(where + ": exists and is not an iris resume journal; move it away or choose another output");
  }
  // Killed after the merge committed the output: a journal that says "merging" and an output
  // that is exactly that merge. Any other existing output is refused as usual (without --force).
  const bool merged_before = journal_exists && was.contains("merging") && fs::exists(o.output, ec);
  if (!merged_before) IRIS_TRY(AtomicOutputFile::destination(o.output, o.overwrite, /*in_order=*/false).status());
  if (!o.report_path.empty()) IRIS_TRY(AtomicOutputFile::destination(o.report_path, o.overwrite, /*in_order=*/true).status());
  ConvertOptions probe = o;
  probe.resume = false;
  probe.plan_only = true;
  IRIS_ASSIGN_OR_RETURN(ConvertReport report, run_convert(probe));
  // The run of tensors this output holds: the whole conversion's, or a part's (its file then
  // carries the part record, and the segments are cut from the part's run).
  const bool part = o.part.active();
  const uint64_t run_first = part ? report.part_record["first_tensor"].get<uint64_t>() : 0;
  const uint64_t segments64 = std::clamp<uint64_t>((report.planned_bytes + o.resume_every - 1) / o.resume_every, 1,
                                                   std::max<uint64_t>(1, std::min<uint64_t>(report.tensors, kMaxParts)));
  const uint32_t segments = uint32_t(segments64);
  json journal = {{"iris_resume_journal", 1}, {"plan", hash_hex(report.plan)}, {"segments", segments},
                  {"resume_every", o.resume_every}, {"output", fs::path(o.output).filename().string()},
                  {"part", part ? o.part.text() : std::string("whole")}};
  if (journal_exists) {
    if (was.value("plan", "") != journal["plan"] || was.value("segments", 0u) != segments ||
        was.value("resume_every", uint64_t(0)) != o.resume_every || was.value("part", "") != journal["part"])
      return usage_error(where + ": the journal of a conversion with another source, options, --part or --resume-every (plan " +
                         was.value("plan", std::string("?")) + ", now " + hash_hex(report.plan) +
                         "); run that conversion again, or remove the folder to start over");
    if (merged_before) {
      uint64_t digest = 0;
      if (!was["merging"].is_string() || !parse_hash_hex(was["merging"].get<std::string>(), &digest) ||
          !output_is_the_merge(o.output, digest, part ? report.part_record : json()))
        return usage_error(o.output + ": already exists and is not the archive " + where + " was merging (use --force to replace it)");
      remove_journal(dir);
      report.resumed_segments = segments;
      report.written.file_bytes = fs::file_size(o.output, ec);
      report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return report;
    }
    // A segment the writer left under a temporary name (no O_TMPFILE) is the killed run's unfinished one.
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().filename().string().find(".partial-") != std::string::npos) fs::remove(it->path(), ec);
  } else {
    if (!fs::create_directory(dir, ec)) return io_error(where + ": cannot create the resume journal (" + ec.message() + ")");
    IRIS_TRY(write_journal(dir, journal, /*replace=*/false, o.partial_files));
  }

  std::vector<std::string> paths;
  for (uint32_t i = 1; i <= segments; ++i) paths.push_back((dir / segment_name(i, segments)).string());
  // Progress over the whole conversion: each segment's share of the planned bytes.
  std::vector<uint64_t> sizes;
  sizes.reserve(report.outcomes.size());
  for (const auto& out : report.outcomes) sizes.push_back(out.bytes);
  std::vector<TensorOutcome> outcomes = std::move(report.outcomes);
  uint64_t done = 0;
  for (uint32_t i = 1; i <= segments; ++i) {
    const PartSpec spec{i, segments};
    const auto [first, end] = part_range(sizes, spec);  // within this output's run
    uint64_t share = 0;
    for (size_t t = first; t < end; ++t) share += sizes[t];
    const std::string& path = paths[i - 1];
    if (fs::exists(path, ec)) {
      if (segment_is_whole(path, report.plan, spec)) {
        ++report.resumed_segments;
        done += share;
        if (o.progress) o.progress(done, report.planned_bytes);
        continue;
      }
      fs::remove(path, ec);  // damaged: made again
    }
    ConvertOptions seg = o;
    seg.resume = false;
    if (part) seg.segment = {true, size_t(run_first + first), size_t(run_first + end), spec};  // the part's own spec kept
    else seg.part = spec;
    seg.output = path;
    seg.max_file_size = 0;  // segments are single files; the merge writes the set
    seg.overwrite = false;
    seg.report_path.clear();
    if (o.progress) seg.progress = [&o, done, &report](uint64_t d, uint64_t) { o.progress(done + d, report.planned_bytes); };
    IRIS_ASSIGN_OR_RETURN(ConvertReport part, run_convert(seg));
    for (size_t t = first; t < end && t - first < part.outcomes.size(); ++t) outcomes[t] = std::move(part.outcomes[t - first]);
    for (auto& w : part.warnings)
      if (std::find(report.warnings.begin(), report.warnings.end(), w) == report.warnings.end()) report.warnings.push_back(std::move(w));
    done += share;
  }
  IRIS_ASSIGN_OR_RETURN(uint64_t digest, segments_digest(paths));
  journal["merging"] = hash_hex(digest);
  IRIS_TRY(write_journal(dir, journal, /*replace=*/true, o.partial_files));
  MergeOptions mo;
  mo.parts = paths;
  mo.output = o.output;
  mo.overwrite = o.overwrite;
  mo.partial_files = o.partial_files;
  mo.direct_io = o.direct_io;
  mo.max_file_size = o.max_file_size;  // (0 for a part: refused with --part)
  MergeTarget target;
  if (part) target = {run_first, report.part_record["tensors"].get<uint64_t>(), report.part_file_reserve, report.part_record};
  IRIS_ASSIGN_OR_RETURN(MergeReport merged, merge_parts(mo, part ? &target : nullptr));
  remove_journal(dir);  // the archive is complete under its name: the journal has served
  report.outcomes = std::move(outcomes);
  report.written = merged.written;
  take_final_sizes(merged.written, report);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.report_path.empty()) IRIS_TRY(write_report_file(o.report_path, report, o.overwrite, o.partial_files));
  return report;
}

}  // namespace iris
