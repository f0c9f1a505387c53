#include "converter/cli/option_errors.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace iris {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_choice(const std::string& given, const std::vector<std::string>& choices) {
  for (const auto& c : choices)
    if (lower(c) == lower(given)) return c;
  std::string best;
  size_t best_d = 3;  // at most two edits
  for (const auto& c : choices) {
    const size_t d = edit_distance(lower(given), lower(c));
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string option_error_text(const std::string& message) {
  std::string one_line = message;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  static const std::regex not_in(R"(^(.*?): (.*) not in \{(.*)\}$)");
  std::smatch m;
  if (!std::regex_match(one_line, m, not_in)) return one_line;
  std::vector<std::string> choices;
  std::string list;
  for (size_t b = 0, e; b <= m[3].str().size(); b = e + 1) {
    e = m[3].str().find(',', b);
    if (e == std::string::npos) e = m[3].str().size();
    choices.push_back(m[3].str().substr(b, e - b));
    list += (list.empty() ? "" : ", ") + choices.back();
  }
  std::string out = m[1].str() + ": '" + m[2].str() + "' is not one of " + list;
  if (auto c = closest_choice(m[2], choices); !c.empty()) out += "; did you mean '" + c + "'?";
  return out;
}

}  // namespace iris
