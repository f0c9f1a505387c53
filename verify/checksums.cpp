#include "verify/checksums.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "common/hashing.h"

namespace iris {


void verify_checksums(const IrisArchive& a, VerifyReport* report, const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0, done = 0;
  for (const auto& t : a.manifest().tensors)
    for (const auto& c : t.components) total += c.spec.bytes;
  for (const auto& t : a.manifest().tensors) {
    TensorReport tr;
    tr.name = t.desc.name;
    tr.format = storage_name(t.desc);
    for (const auto& c : t.components) {
      const uint64_t h = a.hash_component(c);
      done += c.spec.bytes;
      if (progress) progress(done, total);
      CheckResult r{std::string("checksum:") + role_name(c.spec.role), h == c.xxh3, ""};
      if (!r.ok) r.detail = "xxh3 " + hash_hex(h) + " != manifest " + hash_hex(c.xxh3) + " (data corrupted)";
      tr.checks.push_back(std::move(r));
    }
    report->tensors.push_back(std::move(tr));
  }
  for (const auto& f : a.manifest().files) {
    auto st = a.read_file(f.name);
    report->files.push_back({f.name, st.is_ok(), st.is_ok() ? "" : st.status().message()});
  }
  if (a.is_set())  // IrisArchive::open checked each member against the index: that the archive opened is the proof
    report->archive.push_back({"set:members", true, std::to_string(a.file_count() - 1) + " members, each present, of its recorded size "
                               "and manifest checksum, of this set and in its place"});
  verify_padding(a, report);
}

// Every byte of the file is accounted for: FORMAT.md says the bytes between the manifest and
// the data section, and between and after the components and files, are zero. So a flipped
// bit anywhere in the file fails some check (the preamble and manifest have their own
// checksums, components and files theirs, and the rest must be zero).
void verify_padding(const IrisArchive& a, VerifyReport* report) {
  std::vector<CheckResult> results;
  // Absolute [begin, end) of the components and files of each file of the archive (an archive
  // set: the index and every member), gathered in one pass.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> used_by_file(a.file_count());
  for (const auto& t : a.manifest().tensors)
    for (const auto& c : t.components) {
      const uint64_t at = a.file_preamble(c.file).data_offset + c.offset;
      used_by_file[c.file].push_back({at, at + c.spec.bytes});
    }
  for (const auto& f : a.manifest().files) {
    const uint64_t at = a.preamble().data_offset + f.offset;
    used_by_file[0].push_back({at, at + f.size});
  }
  for (size_t file = 0; file < a.file_count() && results.empty(); ++file) {
    const Preamble& p = a.file_preamble(file);
    const auto& map = a.file_mapping(file);
    const std::string where = a.is_set() ? map.path() + ": " : "";
    auto first_nonzero = [&](uint64_t begin, uint64_t end) -> std::optional<uint64_t> {
      if (end <= begin) return std::nullopt;
      const auto bytes = map.bytes(begin, end - begin);
      for (uint64_t i = 0; i < bytes.size(); ++i)
        if (bytes[i] != 0) return begin + i;
      return std::nullopt;
    };
    auto check = [&](const std::string& name, uint64_t begin, uint64_t end) {
      if (auto at = first_nonzero(begin, end))
        results.push_back({name, false, where + "byte at file offset " + std::to_string(*at) + " is not zero (padding must be zero; data corrupted)"});
    };
    check("padding:header", p.manifest_offset + p.manifest_size, p.data_offset);
    auto& used = used_by_file[file];
    std::sort(used.begin(), used.end());
    uint64_t pos = p.data_offset;
    for (const auto& [b, e] : used) {
      check("padding:data", pos, b);
      pos = std::max(pos, e);
    }
    check("padding:data", pos, p.data_offset + p.data_size);
  }
  if (results.empty()) results.push_back({"padding", true, ""});
  else results.resize(1);  // the first offending byte says enough
  for (auto& r : results) report->archive.push_back(std::move(r));
}

}  // namespace iris
