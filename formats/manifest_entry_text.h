// The text of a manifest's tensor entry, written without building its JSON document: what the
// writer sizes a planned manifest with.
//
// Why: a dry run of 10^6 tensors built every entry as nlohmann objects (maps of maps) only to
// measure its dump, twice, and that was most of its time (issue 24 item 10). The text is
// nlohmann's own, byte for byte: sorted keys, dump(1)'s indentation, and nlohmann itself for
// what this does not write plainly (floats, strings that need escapes or are not ASCII).
// tests/formats/manifest_plan_test.cpp pins it to archive_tensor_to_json(t).dump(1).
#pragma once

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/manifest.h"

namespace iris {

// Appends j.dump(1) as it reads `depth` levels deep in a dump(1) document (every line after
// the first indented `depth` spaces more).
void append_json_text(std::string& out, const nlohmann::json& j, int depth);

// Appends archive_tensor_to_json({desc, components, source}).dump(1), `depth` levels deep.
void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const nlohmann::json& source, int depth);

}  // namespace iris
