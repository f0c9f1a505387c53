#include "formats/iris_archive.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "common/file_magic.h"
#include "common/hashing.h"
#include "formats/archive_set.h"
#include "formats/manifest_text.h"

namespace iris {

bool is_iris_archive(const std::string& path) {
  return file_starts_with(path, std::string_view(kIrisMagic.data(), 7)) || file_starts_with(path, std::string_view(kIrisSetMagic.data(), 8));
}

Result<IrisArchive> IrisArchive::open(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  return from_map(std::move(map));
}

Result<IrisArchive> IrisArchive::open_memory(std::span<const uint8_t> bytes, const std::string& name) {
  return from_map(MappedFile::borrow(bytes, name));
}

Result<IrisArchive> IrisArchive::from_map(MappedFile map, SetMode set_mode) {
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
  const bool has_set = !a.manifest_.set.is_null();
  if (a.preamble_.set_index != has_set)
    return invalid_input(path + (has_set ? ": a set record in a file that is not an archive set's index (its magic is IRISMDL2)"
                                         : ": an archive set's index (IRISSET2) without a set record"));
  if (!a.manifest_.set_member.is_null()) IRIS_TRY(SetMemberRecord::from_json(a.manifest_.set_member, path).status());
  if (has_set && set_mode == SetMode::kRefuse) return invalid_input(path + ": is itself an archive set's index, listed as a member of another");
  if (has_set && set_mode == SetMode::kOpen) IRIS_TRY(a.open_members());
  return a;
}

Result<std::vector<std::string>> set_member_paths(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  IRIS_ASSIGN_OR_RETURN(IrisArchive index, IrisArchive::from_map(std::move(map), IrisArchive::SetMode::kIndexOnly));
  if (index.manifest().set.is_null()) return invalid_input(path + ": not an archive set's index");
  IRIS_ASSIGN_OR_RETURN(SetRecord set, SetRecord::from_json(index.manifest().set, path));
  std::vector<std::string> out;
  for (const auto& f : set.files) out.push_back((std::filesystem::path(path).parent_path() / f.name).string());
  return out;
}

Status IrisArchive::open_members() {
  const std::string& path = map_.path();
  if (map_.borrowed())
    return unsupported(path + ": an archive set's index opened from memory: its members can only be opened as files");
  if (preamble_.version_minor < 2 || !manifest_.tensors.empty() || !manifest_.set_member.is_null())
    return invalid_input(path + ": an archive set's index must be version 2.2 or later, list no tensors and no member record");
  IRIS_ASSIGN_OR_RETURN(SetRecord set, SetRecord::from_json(manifest_.set, path));
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const uint32_t count = uint32_t(set.files.size());
  std::vector<ArchiveTensor> tensors;  // (not reserved from the record: the members' manifests say how many)
  for (uint32_t i = 0; i < count; ++i) {
    const SetFileRecord& f = set.files[i];
    const std::string mpath = (folder / f.name).string();
    const std::string ctx = path + ": member " + std::to_string(i + 1) + " of " + std::to_string(count) + " (" + f.name + "): ";
    auto mapped = MappedFile::open(mpath);
    if (!mapped.is_ok()) return mapped.status().with_context(ctx);
    auto opened = from_map(std::move(*mapped), SetMode::kRefuse);
    if (!opened.is_ok()) return opened.status().with_context(ctx);
    IrisArchive& m = *opened;
    if (m.is_set() || m.preamble_.set_index) return invalid_input(ctx + "is itself an archive set's index");
    if (m.map_.size() != f.bytes || m.preamble_.manifest_xxh3 != f.manifest_xxh3)
      return invalid_input(ctx + "is not the file this index lists (" + std::to_string(m.map_.size()) + " bytes, manifest " +
                           hash_hex(m.preamble_.manifest_xxh3) + "; the index records " + std::to_string(f.bytes) + " bytes, " +
                           hash_hex(f.manifest_xxh3) + "): replaced, or from another conversion");
    IRIS_ASSIGN_OR_RETURN(SetMemberRecord r, SetMemberRecord::from_json(m.manifest_.set_member, mpath));
    if (r.id != set.id || r.index != i + 1 || r.count != count || r.first_tensor != f.first_tensor || r.tensors != f.tensors ||
        r.total_tensors != set.tensors || m.manifest_.tensors.size() != f.tensors)
      return invalid_input(ctx + "its member record (set " + hash_hex(r.id) + ", member " + std::to_string(r.index) + " of " +
                           std::to_string(r.count) + ") does not match the index (set " + hash_hex(set.id) + ")");
    if (!m.manifest_.files.empty()) return invalid_input(ctx + "a member holds embedded files (the index holds them)");
    if (m.manifest_.model_type != manifest_.model_type)
      return invalid_input(ctx + "model type '" + m.manifest_.model_type + "' differs from the index's '" + manifest_.model_type + "'");
    for (auto& t : m.manifest_.tensors) {
      for (auto& c : t.components) c.file = i + 1;
      tensors.push_back(std::move(t));
    }
    members_.push_back({std::move(m.map_), m.preamble_});
  }
  manifest_.tensors = std::move(tensors);
  if (!by_name_.build(manifest_.tensors)) {
    std::unordered_map<std::string_view, size_t> seen;
    for (const auto& t : manifest_.tensors) {
      auto [it, fresh] = seen.emplace(t.desc.name, t.components.empty() ? 0 : t.components[0].file);
      if (!fresh) return invalid_input(path + ": tensor '" + t.desc.name + "' is in two members of the set");
    }
    return invalid_input(path + ": a tensor name is listed twice in the set");
  }
  return Status::ok();
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
  const MappedFile& map = mapping(c);
  for (uint64_t pos = 0; pos < c.spec.bytes; pos += kWindow) {
    const uint64_t n = std::min(kWindow, c.spec.bytes - pos);
    h.update(map.data() + offset + pos, n);
    map.release(offset + pos, n);
  }
  return h.digest();
}

Status IrisArchive::verify_tensor(const ArchiveTensor& t) const {
  for (const auto& c : t.components) {
    if (hash_component(c) != c.xxh3)
      return corrupt_data(file_path(c.file) + ": tensor '" + t.desc.name + "': component '" + role_name(c.spec.role) +
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
