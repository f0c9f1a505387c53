// A validated, memory-mapped safetensors file (FORMATS.md section 1).
//
// open() applies every rule of the reference reader, plus the ones it leaves out: duplicate
// names are rejected, JSON nesting is capped, and any error names the file and the tensor.
// An open file holds no file descriptor (a snapshot may have more shards than the process may
// hold open files): reads reopen it through OpenFileCache, and fail, naming it, if the path
// no longer names the file that was parsed.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"
#include "common/name_index.h"
#include "formats/dtype.h"

namespace iris {

struct SafetensorsTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t numel = 0;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t size = 0;    // bytes
};

// The names of a table of tensors, by position (NameIndex's accessor). It holds the table's
// buffer, which a move of the vector (and of the file) keeps in place.
struct TensorNames {
  const SafetensorsTensor* tensors = nullptr;
  std::string_view operator()(size_t i) const { return tensors[i].name; }
};
using SafetensorsIndex = NameIndex<TensorNames>;

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference reader's cap
  static constexpr uint64_t kMaxDim = uint64_t(1) << 48;   // the JSON schema's bound
  static constexpr size_t kMaxRank = 16;

  static Result<SafetensorsFile> open(const std::string& path);
  // The same reader over bytes the caller keeps alive; `name` stands in for the path.
  static Result<SafetensorsFile> open_memory(std::span<const uint8_t> bytes, const std::string& name);
  // A table the caller built and validated over `map` (absolute offsets inside it, in offset
  // order, unique names): how a non-safetensors source, the seed's v1 archive, is read in place.
  static SafetensorsFile from_table(MappedFile map, std::vector<SafetensorsTensor> tensors);

  const std::string& path() const { return map_.path(); }
  const std::string& file_name() const { return file_name_; }  // the path's last component
  uint64_t file_size() const { return map_.size(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in offset order
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::span<const uint8_t> data(const SafetensorsTensor& t) const { return map_.bytes(t.offset, t.size); }
  const MappedFile& mapping() const { return map_; }

 private:
  static Result<SafetensorsFile> from_map(MappedFile map);
  MappedFile map_;
  std::string file_name_;  // named once: every tensor's source record names its file
  std::vector<SafetensorsTensor> tensors_;
  // Positions in tensors_, whose strings never move once the file is built (a move of the
  // file moves the vector's buffer, not its elements): 10^6 names are not held twice.
  SafetensorsIndex index_;
  std::map<std::string, std::string> metadata_;
};

// Parses just a header (the bytes after the 8-byte length). Exposed for tests and for
// validating a header before any data exists.
Status parse_safetensors_header(const std::string& path, std::string_view header, uint64_t data_size,
                                std::vector<SafetensorsTensor>* tensors,
                                std::map<std::string, std::string>* metadata);

// The full reader alone (nlohmann's SAX parser), without the offset checks: the reference the
// plain reader (safetensors_plain_header.h) is compared with (tests/fuzz/fuzz_st_header.cpp).
Status read_safetensors_header_entries(const std::string& path, std::string_view header, std::vector<SafetensorsTensor>* tensors,
                                       std::map<std::string, std::string>* metadata);

}  // namespace iris
