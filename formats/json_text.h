// JSON documents built from untrusted text: nlohmann's dump() throws (type_error 316) on a
// string that is not UTF-8, which with no handler aborted the process while an error about
// that very string was being reported. dump_json() writes such strings (values and keys)
// with their invalid bytes as the text \xHH instead (common/utf8_text.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace iris {

// j.dump(indent), never throwing on invalid UTF-8.
std::string dump_json(const nlohmann::json& j, int indent = -1);

}  // namespace iris
