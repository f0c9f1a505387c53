// Guards applied to untrusted JSON before and while it is parsed.
#pragma once

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

}  // namespace iris
