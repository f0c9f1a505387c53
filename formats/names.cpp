#include "formats/names.h"

#include <cstdint>

#include "common/utf8_text.h"

namespace iris {

std::string escaped_name(std::string_view name) {
  // Control characters too (a NUL would end a C string), then the bytes that are not UTF-8.
  std::string controls;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      static const char kHex[] = "0123456789ABCDEF";
      const char hex[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      controls.append(hex, 4);
    } else {
      controls.push_back(ch);
    }
  }
  return escape_invalid_utf8(controls);
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
