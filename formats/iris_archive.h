// A read-only, memory-mapped .iris v2 archive whose preamble and manifest have been checked.
//
// open() validates everything that can be validated without reading tensor data: preamble
// checksum, section bounds, manifest checksum, every descriptor, offset, size and overlap.
// Component checksums are checked by verify (they need a full read).
#pragma once

#include <span>
#include <string>

#include "common/mapped_file.h"
#include "common/status.h"
#include "formats/iris_preamble.h"
#include "formats/manifest.h"

namespace iris {

class IrisArchive {
 public:
  static Result<IrisArchive> open(const std::string& path);

  const std::string& path() const { return map_.path(); }
  const Preamble& preamble() const { return preamble_; }
  const Manifest& manifest() const { return manifest_; }
  const ArchiveTensor* find(const std::string& name) const;
  std::span<const uint8_t> bytes(const StoredComponent& c) const {
    return map_.bytes(preamble_.data_offset + c.offset, c.spec.bytes);
  }
  std::span<const uint8_t> bytes(const StoredFile& f) const { return map_.bytes(preamble_.data_offset + f.offset, f.size); }
  // Decompressed contents of an embedded file, after checking its checksum.
  Result<std::string> read_file(const std::string& name) const;
  const MappedFile& mapping() const { return map_; }
  uint64_t absolute_offset(const StoredComponent& c) const { return preamble_.data_offset + c.offset; }

 private:
  MappedFile map_;
  Preamble preamble_;
  Manifest manifest_;
};

}  // namespace iris
