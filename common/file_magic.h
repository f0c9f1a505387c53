// Whether a file begins with a given signature: how readers tell formats apart before
// opening them (.iris v2, the seed's v1, ...). False when the file cannot be read.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace iris {

inline bool file_starts_with(const std::string& path, std::string_view magic) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char head[16] = {};
  const bool ok = magic.size() <= sizeof head && std::fread(head, 1, magic.size(), f) == magic.size() &&
                  std::memcmp(head, magic.data(), magic.size()) == 0;
  std::fclose(f);
  return ok;
}

}  // namespace iris
