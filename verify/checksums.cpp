#include "verify/checksums.h"

#include <algorithm>

#include "common/hashing.h"

namespace iris {

namespace {

// Hashes a mapped range in windows, dropping pages behind itself so RSS stays bounded.
uint64_t hash_range(const MappedFile& f, uint64_t offset, uint64_t size, uint64_t* done, uint64_t total,
                    const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kWindow = 64ull << 20;
  StreamingHash h;
  for (uint64_t pos = 0; pos < size; pos += kWindow) {
    uint64_t n = std::min(kWindow, size - pos);
    h.update(f.data() + offset + pos, n);
    f.release(offset + pos, n);
    *done += n;
    if (progress) progress(*done, total);
  }
  return h.digest();
}

}  // namespace

void verify_checksums(const IrisArchive& a, VerifyReport* report, const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0, done = 0;
  for (const auto& t : a.manifest().tensors)
    for (const auto& c : t.components) total += c.spec.bytes;
  for (const auto& t : a.manifest().tensors) {
    TensorReport tr;
    tr.name = t.desc.name;
    tr.format = is_quantized(t.desc.format) ? format_name(t.desc.format) : std::string(dtype_archive_name(t.desc.dtype));
    for (const auto& c : t.components) {
      uint64_t h = hash_range(a.mapping(), a.absolute_offset(c), c.spec.bytes, &done, total, progress);
      CheckResult r{"checksum:" + c.spec.role, h == c.xxh3, ""};
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
