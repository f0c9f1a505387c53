#include "formats/names.h"

#include <cstdint>

namespace iris {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Sequence length and the smallest code point it may encode (shorter forms are overlong).
    const int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = c & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const uint8_t b = uint8_t(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string escaped_name(std::string_view name) {
  std::string out;
  size_t i = 0;
  while (i < name.size()) {
    const uint8_t c = uint8_t(name[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len > 1 && (i + len > name.size() || !is_valid_utf8(name.substr(i, len)))) len = 0;
    if (len == 0 || c < 0x20 || c == 0x7F) {
      static const char kHex[] = "0123456789ABCDEF";
      const char hex[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      out.append(hex, 4);
      ++i;
      continue;
    }
    out.append(name.substr(i, len));
    i += len;
  }
  return out;
}

const char* tensor_name_problem(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) return "name contains a NUL character";
  if (!is_valid_utf8(name)) return "name is not valid UTF-8";
  return nullptr;
}

const char* file_name_problem(std::string_view name) {
  if (const char* p = tensor_name_problem(name)) return p;
  if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string_view::npos) return "not a plain file name";
  return nullptr;
}

}  // namespace iris
