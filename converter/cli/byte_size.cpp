#include "converter/cli/byte_size.h"

#include <cctype>
#include <utility>

namespace iris {

Result<uint64_t> parse_byte_size(const std::string& text, const std::string& option) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 15) return usage_error(option + " '" + text + "': expected a size such as 5GB, 500MB or 2GiB");
  const uint64_t n = std::stoull(text.substr(0, i));
  std::string unit = text.substr(i);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  const std::pair<const char*, uint64_t> units[] = {{"", 1},           {"B", 1},           {"KB", 1000},       {"MB", 1000000},
                                                    {"GB", 1000000000}, {"KIB", 1ull << 10}, {"MIB", 1ull << 20}, {"GIB", 1ull << 30}};
  for (const auto& [u, f] : units)
    if (unit == u) {
      if (n == 0) return usage_error(option + " must be more than 0");
      return n * f;
    }
  return usage_error(option + " '" + text + "': unknown unit '" + text.substr(i) + "' (B, KB, MB, GB, KiB, MiB, GiB)");
}

}  // namespace iris
