#include "formats/json_limits.h"

#include <cstdio>

#include <unordered_set>
#include <vector>

namespace iris {

namespace {

// Maximum bracket nesting of a JSON text, ignoring brackets inside strings. Checked before
// parsing so that a hostile "[[[[..." never reaches a recursive routine.
int max_depth_of(std::string_view s) {
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

// A SAX pass that only looks for an object key repeated inside one object, at any depth: a
// duplicate makes a document mean different things to different parsers (nlohmann keeps the
// last, others the first), so untrusted JSON with one is refused. Linear in the text (a hash
// set per open object), unlike nlohmann's callback parser, whose cost grew quadratically with
// the number of keys.
class DuplicateKeyFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open_.empty() && !open_.back().insert(k).second && duplicate.empty()) duplicate = k;
    return duplicate.empty();  // stop at the first one
  }
  bool end_object() override {
    if (!open_.empty()) open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::vector<std::unordered_set<std::string>> open_;
};

// JSON allows no control bytes but tab, newline and return, even in strings: a text that failed
// to parse and holds one is binary data (a safetensors file given as a config), said so rather
// than by whichever limit or parse error it happened to meet first.
Status refuse_binary(std::string_view text, const std::string& what) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      char where[64];
      std::snprintf(where, sizeof where, "byte 0x%02X at offset %zu", c, i);
      return invalid_input(what + ": not a JSON text (binary data: " + where + ")");
    }
  }
  return Status::ok();
}

}  // namespace

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string msg = e.what();
  // nlohmann prefixes "[json.exception.parse_error.101] "; keep the human part.
  auto pos = msg.find("] ");
  return pos != std::string::npos ? msg.substr(pos + 2) : msg;
}

Result<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                            bool reject_duplicate_keys) {
  if (max_depth_of(text) > kMaxJsonDepth) {
    IRIS_TRY(refuse_binary(text, what));
    return invalid_input(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    nlohmann::json j = nlohmann::json::parse(text.begin(), text.end());
    if (reject_duplicate_keys) {
      DuplicateKeyFinder finder;
      nlohmann::json::sax_parse(text.begin(), text.end(), &finder);
      if (!finder.duplicate.empty()) return invalid_input(what + ": duplicate key '" + finder.duplicate + "'");
    }
    return j;
  } catch (const nlohmann::json::exception& e) {
    IRIS_TRY(refuse_binary(text, what));
    return invalid_input(what + ": invalid JSON: " + json_error_text(e));
  }
}

int json_nesting_depth(std::string_view text) { return max_depth_of(text); }

}  // namespace iris
