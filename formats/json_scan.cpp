#include "formats/json_scan.h"

#include <algorithm>

namespace iris {

bool JsonCursor::string(std::string_view* out) {
  if (!consume('"')) return false;
  const char* start = p_;
  // Control bytes and escapes need the full parser's reading; bytes past 0x7e its UTF-8 check.
  for (const char* q = p_; q != end_; ++q) {
    const auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      *out = {start, size_t(q - start)};
      p_ = q + 1;
      return true;
    }
    if (c < 0x20 || c > 0x7e || c == '\\') break;
  }
  p_ = start - 1;
  return false;
}

bool JsonCursor::uint(uint64_t* out) {
  skip_whitespace();
  const char* start = p_;
  uint64_t v = 0;
  while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
    const uint64_t d = uint64_t(*p_ - '0');
    if (v > (UINT64_MAX - d) / 10) {
      p_ = start;
      return false;
    }
    v = v * 10 + d;
    ++p_;
  }
  if (p_ == start || (*start == '0' && p_ - start > 1) || (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E'))) {
    p_ = start;
    return false;
  }
  *out = v;
  return true;
}

// Past the closing quote of the string starting at p_, stepping over each escaped character.
bool JsonCursor::skip_string() {
  for (++p_; p_ != end_; ++p_) {
    if (*p_ == '\\') {
      if (++p_ == end_) return false;
    } else if (*p_ == '"') {
      ++p_;
      return true;
    }
  }
  return false;
}

bool JsonCursor::skip(std::string_view* out, int* depth) {
  skip_whitespace();
  // Only what may start a value: a byte-order mark mid-text, which nlohmann skips at the start
  // of what it is given, must not pass as the start of a slice.
  if (p_ == end_ || std::string_view("{[\"-0123456789tfn").find(*p_) == std::string_view::npos) return false;
  const char* start = p_;
  int level = 0, deepest = 0;
  while (p_ != end_) {
    const char c = *p_;
    if (c == '"') {
      if (!skip_string()) return false;
      if (level == 0) break;
      continue;
    }
    if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++level);
    } else if (c == '}' || c == ']') {
      if (level == 0) break;  // ends the scalar before it
      if (--level == 0) {
        ++p_;
        break;
      }
    } else if (level == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
      break;
    }
    ++p_;
  }
  if (level != 0) return false;
  *out = {start, size_t(p_ - start)};
  *depth = deepest;
  return true;
}

void json_without_whitespace(std::string_view text, std::string* out) {
  out->resize(text.size());
  size_t n = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      continue;
    } else if (c == '"') {
      in_string = true;
    }
    (*out)[n++] = c;
  }
  out->resize(n);
}

}  // namespace iris
