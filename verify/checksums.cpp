#include "verify/checksums.h"

#include <algorithm>

#include "common/hashing.h"

namespace iris {


void verify_checksums(const IrisArchive& a, VerifyReport* report, const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0, done = 0;
  for (const auto& t : a.manifest().tensors)
    for (const auto& c : t.components) total += c.spec.bytes;
  for (const auto& t : a.manifest().tensors) {
    TensorReport tr;
    tr.name = t.desc.name;
    tr.format = is_quantized(t.desc.format) ? format_name(t.desc.format) : std::string(dtype_archive_name(t.desc.dtype));
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
}

}  // namespace iris
