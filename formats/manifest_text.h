// An archive's manifest read from its text: two readers that give the same verdict.
//
// read_manifest_parsed() is the reference: nlohmann's parser (parse_untrusted_json_streaming)
// hands each tensor entry to ManifestReader, which checks everything and names the first
// problem. read_manifest_fast() reads the text as the writer spells it (JsonCursor) and checks
// the same things without building a document per entry or a message; anything else, valid
// or not, it declines. read_manifest() tries the fast reader and, when it declines, the
// reference one, so every message and its precedence are the reference reader's. The 29 MB
// manifest of a 36k-tensor archive took 0.49 s through the reference reader alone (issue 24
// item 5; docs/BENCHMARKS.md, "Archive open, third step").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "formats/manifest.h"
#include "formats/tensor_index.h"

namespace iris {

// `data_size`: the data section's size; `major`.`minor`: the preamble's version, which the
// manifest's format_version must repeat. `*index` is built over the manifest's tensors.
Result<Manifest> read_manifest(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                               const std::string& path, TensorIndex* index);

Result<Manifest> read_manifest_parsed(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                                      const std::string& path);

// The manifest read_manifest_parsed() returns, when `text` is a valid manifest in the writer's
// spelling (tests/formats/manifest_fast_test.cpp compares the two); nullopt otherwise. Source
// records are kept as text (SourceRecord::from_text). `*index` is built over its tensors, which
// is how it finds a name listed twice.
std::optional<Manifest> read_manifest_fast(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                                           const std::string& path, TensorIndex* index);

}  // namespace iris
