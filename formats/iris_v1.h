// The seed engine's .iris v1 archive (magic IRISMDL1; written by its convert_to_iris.py, see
// FORMAT.md appendix A): a flat table of named raw blobs, no checksums, no quantization
// metadata. Read-only here: open() validates every field a hostile file could use to make a
// reader misbehave (table and blobs past the end, overlapping blobs, unknown dtype codes,
// sizes that disagree with shapes, names that collide after the 128-byte truncation), and
// check_conventions() reports what the seed's writer always does but a reader need not
// require (4096-byte header, 256-byte blob alignment, zero fill, no trailing bytes).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"

namespace iris {

inline constexpr std::string_view kIrisV1Magic = "IRISMDL1";
inline constexpr uint64_t kV1HeaderBytes = 16;        // magic, u32 version, u32 count
inline constexpr uint64_t kV1EntryBytes = 216;        // 128 name + offset + nbytes + dtype + ndim + 8 dims
inline constexpr uint64_t kV1NameBytes = 128;
inline constexpr uint64_t kV1MaxDims = 8;
inline constexpr uint64_t kV1HeaderAlign = 4096;      // the table is zero-padded to this
inline constexpr uint64_t kV1BlobAlign = 256;         // each blob starts at a multiple of this

// Whether `path` starts with the v1 magic.
bool is_iris_v1_archive(const std::string& path);

enum class V1DType : uint32_t { kBF16 = 0, kF32 = 1, kU8 = 2, kI32 = 3 };
const char* v1_dtype_name(V1DType d);  // "bf16", "f32", "u8", "i32"
uint64_t v1_dtype_bytes(V1DType d);

struct V1Entry {
  std::string name;
  uint64_t offset = 0;  // absolute file offset
  uint64_t nbytes = 0;
  V1DType dtype = V1DType::kU8;
  std::vector<uint64_t> shape;  // ndim dims
  bool name_full = false;       // exactly 128 bytes: possibly truncated by the writer
};

class V1Archive {
 public:
  static Result<V1Archive> open(const std::string& path);
  static Result<V1Archive> open_memory(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& path() const { return map_.path(); }
  const MappedFile& mapping() const { return map_; }
  const std::vector<V1Entry>& entries() const { return entries_; }
  const V1Entry* find(std::string_view name) const;
  std::span<const uint8_t> bytes(const V1Entry& e) const { return map_.bytes(e.offset, e.nbytes); }
  // 16 + count * 216: where the table ends (before its padding).
  uint64_t table_end() const { return kV1HeaderBytes + entries_.size() * kV1EntryBytes; }

  // The writer's conventions, one line each where the file departs from them (empty: none).
  std::vector<std::string> check_conventions() const;

 private:
  static Result<V1Archive> from_map(MappedFile map);
  MappedFile map_;
  std::vector<V1Entry> entries_;
};

}  // namespace iris
