// A read-only, memory-mapped .iris v2 archive whose preamble and manifest have been checked.
//
// open() validates everything that can be validated without reading tensor data: preamble
// checksum, section bounds, manifest checksum, every descriptor, offset, size and overlap.
// Component checksums are checked by verify (they need a full read).
//
// Opening an archive set's index (FORMAT.md section 10) opens the set: every member is
// mapped and checked against the index (present, of its recorded size and manifest checksum,
// of this set and in its place), and the archive reads as one, its tensors those of the
// members in order; each component records which file holds it (StoredComponent::file).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"
#include "formats/iris_preamble.h"
#include "formats/manifest.h"
#include "formats/tensor_index.h"
#include "formats/tensor_decode.h"

namespace iris {

// Whether `path` starts with an .iris magic of any generation ("IRISMDL"): how callers that
// take archives or snapshots tell them apart before opening.
bool is_iris_archive(const std::string& path);

// The member files an archive set's index at `path` lists (their paths, in its folder), read
// from the index alone: what a writer replacing that index removes with it. An error when
// `path` is not a readable set index.
Result<std::vector<std::string>> set_member_paths(const std::string& path);

class IrisArchive {
 public:
  static Result<IrisArchive> open(const std::string& path);
  // The same checks over bytes in memory that the caller keeps alive; `name` is used in messages.
  static Result<IrisArchive> open_memory(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& path() const { return map_.path(); }
  const Preamble& preamble() const { return preamble_; }
  // For a set: the index's records, the embedded files, and every member's tensors.
  const Manifest& manifest() const { return manifest_; }
  bool is_set() const { return !members_.empty(); }
  // The files the archive is made of: 1 for a single archive, 1 + the members for a set (file
  // 0 is the index). StoredComponent::file and StoredFile (always file 0) index these.
  size_t file_count() const { return 1 + members_.size(); }
  const MappedFile& file_mapping(size_t file) const { return file ? members_[file - 1].map : map_; }
  const Preamble& file_preamble(size_t file) const { return file ? members_[file - 1].preamble : preamble_; }
  const std::string& file_path(size_t file) const { return file_mapping(file).path(); }
  // O(1): a hash index built when the archive is opened.
  const ArchiveTensor* find(std::string_view name) const;
  std::optional<size_t> index_of(std::string_view name) const;
  std::span<const uint8_t> bytes(const StoredComponent& c) const {
    return file_mapping(c.file).bytes(absolute_offset(c), c.spec.bytes);
  }
  std::span<const uint8_t> bytes(const StoredFile& f) const { return map_.bytes(preamble_.data_offset + f.offset, f.size); }
  // Decompressed contents of an embedded file, after checking its checksum.
  Result<std::string> read_file(const std::string& name) const;
  // The mapping of the archive (of a set: its index), and of the file holding `c`.
  const MappedFile& mapping() const { return map_; }
  const MappedFile& mapping(const StoredComponent& c) const { return file_mapping(c.file); }
  // `c`'s offset in the file that holds it.
  uint64_t absolute_offset(const StoredComponent& c) const { return file_preamble(c.file).data_offset + c.offset; }
  // Every component of `t`, by role, as spans into the mapping.
  ComponentBytes component_bytes(const ArchiveTensor& t) const;

  // XXH3-64 of a component's bytes, streamed through the mapping.
  uint64_t hash_component(const StoredComponent& c) const;
  // Hash every component of `t` / the stored bytes of `f` and compare with the manifest:
  // kCorrupt naming the first that differs.
  Status verify_tensor(const ArchiveTensor& t) const;
  Status verify_file(const StoredFile& f) const;

 private:
  // What an archive set's index does when it is opened: open its members (kOpen), be refused
  // (kRefuse: a member, which must not be an index itself, so that no chain or cycle of indexes
  // is followed), or stay an index without members (kIndexOnly: set_member_paths).
  enum class SetMode { kOpen, kRefuse, kIndexOnly };
  static Result<IrisArchive> from_map(MappedFile map, SetMode set_mode = SetMode::kOpen);
  friend Result<std::vector<std::string>> set_member_paths(const std::string& path);
  Status open_members();  // a set's index: maps and checks the members, takes their tensors
  struct Member {
    MappedFile map;
    Preamble preamble;
  };
  MappedFile map_;
  Preamble preamble_;
  Manifest manifest_;
  std::vector<Member> members_;  // a set's members, in order
  TensorIndex by_name_;  // over manifest_.tensors, which never change after open
};

}  // namespace iris
