// Guards applied to untrusted JSON before and while it is parsed.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace iris {

constexpr int kMaxJsonDepth = 64;

// The deepest bracket nesting of a JSON text (brackets inside strings ignored), in one pass:
// checked before any parser sees a hostile "[[[[...".
int json_nesting_depth(std::string_view text);

// The human part of a nlohmann exception's text (without "[json.exception.parse_error.101] ").
std::string json_error_text(const nlohmann::json::exception& e);

// Parses `text` as JSON in time linear in its size, refusing nesting deeper than
// kMaxJsonDepth and, when `reject_duplicate_keys`, a key repeated inside any one object. `what` names the source
// in error messages ("model.safetensors: header").
Result<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                            bool reject_duplicate_keys = true);

// parse_untrusted_json() (duplicate keys refused) that hands each element of the root object's
// list `list_key` to `on_element` as soon as the element is complete, and leaves that list
// empty in the document returned: a 36k-tensor manifest is read one small document at a time
// instead of as one 29 MB document freed at the end (issue 24 item 5). Elements are handed
// over even when parsing later fails: the caller reports the parse error first.
Result<nlohmann::json> parse_untrusted_json_streaming(std::string_view text, const std::string& what,
                                                      const char* list_key,
                                                      const std::function<void(nlohmann::json&)>& on_element);

}  // namespace iris
