#include "formats/json_limits.h"

#include <cstdio>

#include <unordered_set>
#include <vector>

namespace iris {

namespace {

// Maximum bracket nesting of a JSON text, ignoring brackets inside strings: for a text whose
// parse stopped early, whose depth the parser never saw whole.
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

// Builds the document in one SAX pass and notes the first object key repeated inside one object,
// at any depth: a duplicate makes a document mean different things to different parsers
// (nlohmann keeps the last, others the first), so untrusted JSON with one is refused. One pass,
// not a parse and then a second lexing pass for duplicates: the manifest of a 36k-tensor
// archive (29 MB) is read when an engine opens it (issue 24 item 5). Each key is looked up in
// the object being built (no set per object). Parsing goes on after a duplicate, so that a
// document that is also malformed is reported as malformed, as it was with two passes.
class UntrustedDomBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  using json = nlohmann::json;
  explicit UntrustedDomBuilder(bool check_duplicates) : check_duplicates_(check_duplicates) {}
  // Elements of the root object's list `key` go to `fn` when complete, not into the document.
  void stream_list(const char* key, const std::function<void(json&)>* fn) {
    stream_key_ = key;
    on_element_ = fn;
  }

  json root;
  std::string duplicate;  // the first key found twice in one object, when checked
  bool failed = false;    // a parse error: `error` holds its text
  bool too_deep = false;  // stopped at a bracket nested deeper than kMaxJsonDepth
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t& v) override { return value(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    failed = true;
    error = json_error_text(e);
    return false;
  }

 private:
  // A finished scalar or container goes where the DOM parser would put it: the root, the
  // array being built, or the object under the last key (the last of repeated keys wins).
  json* place(json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) return &parent.emplace_back(std::move(v));
    // One lookup finds a repeated key and places the value: a key's value is placed before
    // the next key is read, so the first duplicate found is the first in the text.
    auto [it, inserted] = parent.get_ref<json::object_t&>().try_emplace(std::move(key_), std::move(v));
    if (!inserted) {
      if (check_duplicates_ && duplicate.empty()) duplicate = key_;
      it->second = std::move(v);  // the last of repeated keys wins, as nlohmann's parser does
    }
    return &it->second;
  }
  bool value(json v) {
    json* placed = place(std::move(v));
    if (streamed_ && stack_.back() == streamed_) hand_over(placed);
    return true;
  }
  bool open(json fresh) {
    // Stops the parse at the first bracket too deep: the parser and this builder are
    // iterative, so nothing recursive ever sees a hostile "[[[[..." (parse_with says which
    // error is reported).
    if (++depth_ > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    const bool is_streamed_list = on_element_ && stack_.size() == 1 && root.is_object() && fresh.is_array() && key_ == stream_key_;
    stack_.push_back(place(std::move(fresh)));
    if (is_streamed_list) streamed_ = stack_.back();
    return true;
  }
  bool close() {
    --depth_;
    json* done = stack_.back();
    stack_.pop_back();
    if (done == streamed_) streamed_ = nullptr;
    else if (streamed_ && stack_.back() == streamed_) hand_over(done);
    return true;
  }
  // The streamed list holds at most this one element, so pointers to it stay valid while it
  // is built (the list's storage is not reallocated: clear() keeps its capacity).
  void hand_over(json* element) {
    (*on_element_)(*element);
    streamed_->clear();
  }

  bool check_duplicates_;
  std::vector<json*> stack_;
  std::string key_;
  const char* stream_key_ = nullptr;
  const std::function<void(json&)>* on_element_ = nullptr;
  json* streamed_ = nullptr;  // the list being streamed, while it is open
  int depth_ = 0;
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

namespace {

Result<nlohmann::json> parse_with(UntrustedDomBuilder& builder, std::string_view text, const std::string& what) {
  // Nesting is checked while parsing, not in a pass of its own (29 MB of manifest, issue 24
  // item 5), yet reported as the pass before the parse did: a text nested too deep anywhere,
  // even after a syntax error, is refused for its depth. A text that parsed whole has the
  // parser's depth, so the pass over the text is needed only when parsing stopped early.
  nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  if (builder.too_deep || (builder.failed && max_depth_of(text) > kMaxJsonDepth)) {
    IRIS_TRY(refuse_binary(text, what));
    return invalid_input(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  if (builder.failed) {
    IRIS_TRY(refuse_binary(text, what));
    return invalid_input(what + ": invalid JSON: " + builder.error);
  }
  if (!builder.duplicate.empty()) return invalid_input(what + ": duplicate key '" + builder.duplicate + "'");
  return std::move(builder.root);
}

}  // namespace

Result<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                            bool reject_duplicate_keys) {
  UntrustedDomBuilder builder(reject_duplicate_keys);
  return parse_with(builder, text, what);
}

Result<nlohmann::json> parse_untrusted_json_streaming(std::string_view text, const std::string& what,
                                                      const char* list_key,
                                                      const std::function<void(nlohmann::json&)>& on_element) {
  UntrustedDomBuilder builder(true);
  builder.stream_list(list_key, &on_element);
  return parse_with(builder, text, what);
}

int json_nesting_depth(std::string_view text) { return max_depth_of(text); }

}  // namespace iris
