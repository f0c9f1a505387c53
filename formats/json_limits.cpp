#include "formats/json_limits.h"

#include <unordered_set>

namespace iris {

namespace {

// Maximum bracket nesting of a JSON text, ignoring brackets inside strings. Checked before
// parsing so that a hostile "[[[[..." never reaches a recursive routine.
int json_max_depth(std::string_view s) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return max_depth;
}

}  // namespace

Result<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                            bool reject_duplicate_keys) {
  if (json_max_depth(text) > kMaxJsonDepth)
    return invalid_input(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  std::unordered_set<std::string> top_keys;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (reject_duplicate_keys && event == nlohmann::json::parse_event_t::key && depth == 1) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!top_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  try {
    nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), callback);
    if (!duplicate.empty()) return invalid_input(what + ": duplicate key '" + duplicate + "'");
    return j;
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] "; keep the human part.
    auto pos = msg.find("] ");
    if (pos != std::string::npos) msg = msg.substr(pos + 2);
    return invalid_input(what + ": invalid JSON: " + msg);
  }
}

}  // namespace iris
