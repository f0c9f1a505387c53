// The archive's JSON manifest: every tensor, its components' byte ranges and checksums,
// the embedded files, and provenance. manifest_from_json() trusts nothing it reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "formats/tensor_desc.h"

namespace iris {

struct StoredComponent {
  ComponentSpec spec;
  uint64_t offset = 0;  // relative to the data section; a multiple of the alignment
  uint64_t xxh3 = 0;
};

struct ArchiveTensor {
  TensorDesc desc;
  std::vector<StoredComponent> components;  // in component_specs() order
  nlohmann::json source = nlohmann::json::object();  // where it came from (file, original tensors)

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
};

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

// The manifest's format_version must be the preamble's [major, minor]: a file whose two
// version fields disagree was not written by one writer.
Status check_manifest_version(const nlohmann::json& j, uint16_t major, uint16_t minor, const std::string& path);

nlohmann::json tensor_desc_to_json(const TensorDesc& d);

}  // namespace iris
