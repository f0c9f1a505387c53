#include "formats/iris_archive.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/file_magic.h"
#include "common/hashing.h"
#include "formats/manifest_text.h"

namespace iris {

bool is_iris_archive(const std::string& path) { return file_starts_with(path, std::string_view(kIrisMagic.data(), 7)); }

Result<IrisArchive> IrisArchive::open(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  return from_map(std::move(map));
}

Result<IrisArchive> IrisArchive::open_memory(std::span<const uint8_t> bytes, const std::string& name) {
  return from_map(MappedFile::borrow(bytes, name));
}

Result<IrisArchive> IrisArchive::from_map(MappedFile map) {
  IrisArchive a;
  a.map_ = std::move(map);
  const std::string path = a.map_.path();
  IRIS_ASSIGN_OR_RETURN(a.preamble_, decode_preamble(a.map_.data(), a.map_.size(), path));
  std::string_view text(reinterpret_cast<const char*>(a.map_.data()) + a.preamble_.manifest_offset,
                        a.preamble_.manifest_size);
  if (xxh3_64(text.data(), text.size()) != a.preamble_.manifest_xxh3)
    return corrupt_data(path + ": manifest checksum mismatch (corrupt manifest)");
  IRIS_ASSIGN_OR_RETURN(a.manifest_, read_manifest(text, a.preamble_.data_size, a.preamble_.version_major,
                                                   a.preamble_.version_minor, path, &a.by_name_));
  return a;
}

std::optional<size_t> IrisArchive::index_of(std::string_view name) const { return by_name_.find(manifest_.tensors, name); }

const ArchiveTensor* IrisArchive::find(std::string_view name) const {
  auto i = index_of(name);
  return i ? &manifest_.tensors[*i] : nullptr;
}

ComponentBytes IrisArchive::component_bytes(const ArchiveTensor& t) const {
  ComponentBytes c;
  for (const auto& comp : t.components) c[static_cast<int>(comp.spec.role)] = bytes(comp);
  return c;
}

uint64_t IrisArchive::hash_component(const StoredComponent& c) const {
  // In windows, dropping pages behind itself: hashing an archive larger than memory keeps
  // this process's resident set bounded (the page cache keeps what the OS wants to keep).
  constexpr uint64_t kWindow = 64ull << 20;
  StreamingHash h;
  const uint64_t offset = absolute_offset(c);
  for (uint64_t pos = 0; pos < c.spec.bytes; pos += kWindow) {
    const uint64_t n = std::min(kWindow, c.spec.bytes - pos);
    h.update(map_.data() + offset + pos, n);
    map_.release(offset + pos, n);
  }
  return h.digest();
}

Status IrisArchive::verify_tensor(const ArchiveTensor& t) const {
  for (const auto& c : t.components) {
    if (hash_component(c) != c.xxh3)
      return corrupt_data(path() + ": tensor '" + t.desc.name + "': component '" + role_name(c.spec.role) +
                          "': checksum mismatch (the bytes were damaged)");
  }
  return Status::ok();
}

Status IrisArchive::verify_file(const StoredFile& f) const {
  auto b = bytes(f);
  if (xxh3_64(b.data(), b.size()) != f.xxh3) return corrupt_data(path() + ": embedded file '" + f.name + "': checksum mismatch");
  return Status::ok();
}

Result<std::string> IrisArchive::read_file(const std::string& name) const {
  for (const auto& f : manifest_.files) {
    if (f.name != name) continue;
    IRIS_TRY(verify_file(f));
    auto b = bytes(f);
    if (f.encoding == "raw") return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    std::string out(f.raw_size, '\0');
    size_t n = ZSTD_decompress(out.data(), out.size(), b.data(), b.size());
    if (ZSTD_isError(n) || n != f.raw_size) return invalid_input(path() + ": embedded file '" + name + "': cannot decompress");
    return out;
  }
  return invalid_input(path() + ": no embedded file '" + name + "'");
}

}  // namespace iris
