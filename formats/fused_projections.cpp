#include "formats/fused_projections.h"

namespace iris {

namespace {

constexpr const char* kGroups[][3] = {{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj", nullptr}, {"w1", "w3", nullptr}, {"wq", "wk", "wv"}};

}  // namespace

std::vector<std::string> fused_sibling_names(const std::string& name) {
  std::vector<std::string> out;
  // Each dot-separated segment that names a projection of a group gives the group's others.
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    const std::string seg = name.substr(start, end - start);
    for (const auto& g : kGroups) {
      bool member = false;
      for (const char* p : g) member = member || (p && seg == p);
      if (!member) continue;
      for (const char* p : g)
        if (p && seg != p) out.push_back(name.substr(0, start) + p + name.substr(end));
    }
    start = end + 1;
  }
  return out;
}

}  // namespace iris
