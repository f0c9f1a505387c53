// The archive's JSON manifest: every tensor, its components' byte ranges and checksums,
// the embedded files, and provenance. manifest_from_json() trusts nothing it reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "formats/tensor_desc.h"

namespace iris {

struct StoredComponent {
  ComponentSpec spec;
  uint64_t offset = 0;  // relative to the data section; a multiple of the alignment
  uint64_t xxh3 = 0;
  // Which file of an archive set holds it (FORMAT.md section 10): 0 in a single archive, else
  // the 1-based member. Set by IrisArchive when it opens a set; offset is within that file.
  uint32_t file = 0;
};

// Where a tensor came from (file, original tensors: FORMAT.md section 3), a JSON object: as
// the writer built it, or as its text in an opened archive's manifest, parsed when asked for.
// An engine opening a 36k-tensor archive reads none of them; building them as documents and
// freeing them at close was a fifth of the open (issue 24 item 5).
class SourceRecord {
 public:
  SourceRecord() = default;  // {}, allocating nothing
  SourceRecord(nlohmann::json j) : json_(std::move(j)), kind_(Kind::kJson) {}  // NOLINT(google-explicit-constructor): records are built as JSON
  // `text` must be one JSON object without repeated keys (manifest_fast.cpp checks it).
  static SourceRecord from_text(std::string text);
  // The object; a record held as text is parsed on each call.
  nlohmann::json json() const;

 private:
  enum class Kind { kEmpty, kJson, kText };
  nlohmann::json json_;  // kJson
  std::string text_;     // kText
  Kind kind_ = Kind::kEmpty;
};

struct ArchiveTensor {
  TensorDesc desc;
  std::vector<StoredComponent> components;  // in component_specs() order
  SourceRecord source;

  const StoredComponent* component(Role role) const;
};

struct StoredFile {
  std::string name;      // e.g. "config.json", "tokenizer.json"
  std::string encoding;  // "zstd" or "raw"
  uint64_t offset = 0, size = 0, raw_size = 0, xxh3 = 0;  // xxh3 of the stored bytes
};

struct Manifest {
  uint64_t alignment = 4096;
  std::string model_type;
  nlohmann::json tool = nlohmann::json::object();
  nlohmann::json provenance = nlohmann::json::object();
  std::vector<ArchiveTensor> tensors;
  std::vector<StoredFile> files;
  // A conversion part (FORMAT.md section 9, version 2.1): null in a whole archive. Its schema is
  // checked where parts are merged (converter/pipeline/parts.h); a reader only requires an object.
  nlohmann::json part;
  // An archive set (FORMAT.md section 10, version 2.2): the set record in its index, the member
  // record in each member; null otherwise. Their schemas are formats/archive_set.h's; the
  // index is opened as the set by IrisArchive, which checks them.
  nlohmann::json set, set_member;
  // A tensor-parallel rank's archive (FORMAT.md section 11, version 2.3): its place in the world
  // and the box of each logical tensor it holds; null otherwise. Checked by `iris verify --ranks`.
  nlohmann::json rank;
};

// The minor format version a manifest needs: 3 with a rank record, 2 with a set or set member record, 1 with a part
// record, else 0 (a whole archive is written as 2.0, byte for byte what earlier writers wrote).
uint16_t manifest_minor_version(const Manifest& m);

nlohmann::json manifest_to_json(const Manifest& m);
// One tensor's entry of manifest_to_json()'s "tensors" list.
nlohmann::json archive_tensor_to_json(const ArchiveTensor& t);
// manifest_to_json(m).dump(1).size(), one tensor at a time: the writer plans the data offset
// from it, and the document of 10^6 tensors took gigabytes (issue 24 item 10).
uint64_t manifest_text_size(const Manifest& m);
// Validates structure, names, descriptors against component_specs(), alignment, bounds
// within `data_size` and non-overlap of every byte range. Takes the document by value and
// moves its parts (params, source records) into the manifest: a 36k-tensor manifest's records
// are not copied when an engine opens it (pass it with std::move).
Result<Manifest> manifest_from_json(nlohmann::json j, uint64_t data_size, const std::string& path);

// manifest_from_json() one tensor entry at a time, for a parser that hands the entries of
// "tensors" over as it reads them (parse_untrusted_json_streaming): the whole document of a
// 36k-tensor manifest is never built (issue 24 item 5). Reports exactly what
// manifest_from_json() reports: a tensor's error is kept and returned by finish() after the
// document-level checks that come before it.
class ManifestReader {
 public:
  struct Range {  // bytes [begin, end) of the data section: tensor `item`'s component, or file `item`
    uint64_t begin, end;
    size_t item;
    int component;  // its index in the tensor's components; -1: embedded file `item`
  };

  ManifestReader(uint64_t data_size, std::string path);
  ManifestReader(const ManifestReader&) = delete;  // the name set refers to this reader's tensors
  ManifestReader& operator=(const ManifestReader&) = delete;
  // Moves params and source out of `entry`.
  void add_tensor(nlohmann::json& entry);
  // The document less the entries already added; its own entries of "tensors" are added first.
  Result<Manifest> finish(nlohmann::json j);
  // An entry that its caller has read and checked as read_tensor() checks one, but for its
  // name's uniqueness (read_manifest_fast checks that when it indexes the names): listed with
  // its byte ranges.
  void add_checked(ArchiveTensor t);

 private:
  Status read_tensor(nlohmann::json& entry);

  uint64_t data_size_;
  std::string path_;
  Status error_ = Status::ok();
  std::vector<ArchiveTensor> tensors_;
  std::vector<Range> ranges_;
  // Positions in tensors_, hashed and compared by name: a second copy of 36k names cost a
  // tenth of an archive's open (issue 24 item 5).
  struct NameHash {
    const std::vector<ArchiveTensor>* tensors;
    size_t operator()(size_t i) const { return std::hash<std::string_view>{}((*tensors)[i].desc.name); }
  };
  struct NameEq {
    const std::vector<ArchiveTensor>* tensors;
    bool operator()(size_t a, size_t b) const { return (*tensors)[a].desc.name == (*tensors)[b].desc.name; }
  };
  std::unordered_set<size_t, NameHash, NameEq> names_{0, NameHash{&tensors_}, NameEq{&tensors_}};
};

// The manifest's format_version must be the preamble's [major, minor]: a file whose two
// version fields disagree was not written by one writer.
Status check_manifest_version(const nlohmann::json& j, uint16_t major, uint16_t minor, const std::string& path);

nlohmann::json tensor_desc_to_json(const TensorDesc& d);

}  // namespace iris
