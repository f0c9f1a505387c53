// The text of a manifest's tensor entry, written without building its JSON document: what the
// writer sizes a planned manifest with.
//
// Why: a dry run of 10^6 tensors built every entry as nlohmann objects (maps of maps) only to
// measure its dump, twice, and that was most of its time (issue 24 item 10). The text is
// nlohmann's own, byte for byte: sorted keys, dump(1)'s indentation, and nlohmann itself for
// what this does not write plainly (floats, strings that need escapes or are not ASCII).
// tests/formats/manifest_plan_test.cpp pins it to archive_tensor_to_json(t).dump(1).
#pragma once

#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/manifest.h"

namespace iris {

// Appends j.dump(1) as it reads `depth` levels deep in a dump(1) document (every line after
// the first indented `depth` spaces more). No binary values (JSON text has none).
void append_json_text(std::string& out, const nlohmann::json& j, int depth);

// Appends archive_tensor_to_json({desc, components, source}).dump(1), `depth` levels deep.
void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const nlohmann::json& source, int depth);
// The same with the source record's text appended by `source_text(out, depth)` (a record made
// without its JSON: SourceRecordMaker::text, formats/iris_writer.h).
void append_tensor_entry_text(std::string& out, const TensorDesc& desc, std::span<const StoredComponent> components,
                              const std::function<void(std::string&, int)>& source_text, int depth);

// For writing such a record by hand: a string and an unsigned integer as dump() writes them,
// a list of unsigned integers (a shape) `depth` levels deep,
void append_json_string(std::string& out, std::string_view s);
void append_json_uint(std::string& out, uint64_t v);
void append_json_uints(std::string& out, std::span<const uint64_t> values, int depth);

// and the members of a non-empty object or array `depth` levels deep: each on a line of its
// own, one level deeper, the closing bracket back at `depth`. An object's keys must come in
// nlohmann's order (sorted), each followed by its value.
class JsonMembers {
 public:
  JsonMembers(std::string& out, int depth, char open) : out_(out), depth_(depth) { out_ += open; }
  void key(std::string_view k);  // the next member's key (then its value)
  void element();                // the next element (then its value)
  void close(char bracket);
  int inner() const { return depth_ + 1; }  // the depth of the values

 private:
  std::string& out_;
  int depth_;
  bool first_ = true;
};

// A list `depth` levels deep as dump() writes it: "[]" when empty, else each item written by
// write(item, depth of the items) on a line of its own.
template <typename Range, typename Write>
void append_json_list(std::string& out, const Range& items, int depth, Write&& write) {
  if (std::empty(items)) {
    out += "[]";
    return;
  }
  JsonMembers list(out, depth, '[');
  for (const auto& item : items) {
    list.element();
    write(item, list.inner());
  }
  list.close(']');
}

}  // namespace iris
