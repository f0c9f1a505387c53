#include "converter/cli/command_line.h"

#include <algorithm>

#include "converter/cli/option_errors.h"

namespace iris {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

CommandLine normalize_command_line(int argc, const char* const* argv, const std::vector<std::string>& commands,
                                   const std::vector<std::string>& valued_options, const std::vector<std::string>& movable_flags) {
  CommandLine c;
  c.args.push_back(argc > 0 ? argv[0] : "iris");
  std::vector<std::string> rest(argv + std::min(argc, 1), argv + std::max(argc, 1));
  if (!rest.empty() && (rest[0] == "-V" || rest[0] == "version")) rest[0] = "--version";
  if (!rest.empty() && rest[0] == "help") {  // `iris help` and `iris help COMMAND`
    rest.erase(rest.begin());
    if (!rest.empty() && contains(commands, rest[0])) {
      c.command = rest[0];
      c.args.insert(c.args.end(), {rest[0], "--help"});
    } else if (!rest.empty()) {
      const std::string near = closest_choice(rest[0], commands);
      c.error = "help: no command '" + rest[0] + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") + " (commands: " +
                joined(commands) + ")";
    } else {
      c.args.push_back("--help");
    }
    return c;
  }
  // The first word that is not an option or an option's value names the command.
  size_t at = rest.size();
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (a == "--help" || a == "-h" || a == "--version") break;  // CLI11 answers these itself
    if (a.size() > 1 && a[0] == '-') {
      if (contains(valued_options, a)) ++i;  // "--threads 2": 2 is its value
      continue;
    }
    at = i;
    break;
  }
  if (at == rest.size()) {
    const bool asks = std::any_of(rest.begin(), rest.end(), [](const std::string& a) { return a == "--help" || a == "-h" || a == "--version"; });
    if (!asks) c.error = "no command given (commands: " + joined(commands) + "; see iris --help)";
    c.args.insert(c.args.end(), rest.begin(), rest.end());
    return c;
  }
  if (!contains(commands, rest[at])) {
    const std::string near = closest_choice(rest[at], commands);
    c.error = "unknown command '" + rest[at] + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") + " (commands: " +
              joined(commands) + "; see iris --help)";
    return c;
  }
  c.command = rest[at];
  // Flags of the command given before its name go right after it; the main program's own
  // options stay where they are.
  std::vector<std::string> before, moved;
  for (size_t i = 0; i < at; ++i) (contains(movable_flags, rest[i]) ? moved : before).push_back(rest[i]);
  c.args.insert(c.args.end(), before.begin(), before.end());
  c.args.push_back(rest[at]);
  c.args.insert(c.args.end(), moved.begin(), moved.end());
  c.args.insert(c.args.end(), rest.begin() + at + 1, rest.end());
  return c;
}

std::string unknown_option_text(const std::string& message, const std::vector<std::string>& options) {
  const std::string lead = "were not expected: ", lead1 = "was not expected: ";
  size_t p = message.find(lead);
  size_t skip = lead.size();
  if (p == std::string::npos) p = message.find(lead1), skip = lead1.size();
  if (p == std::string::npos) return "";
  std::vector<std::string> unknown;
  const std::string list = message.substr(p + skip);
  for (size_t b = 0, e; b < list.size(); b = e + 1) {
    e = list.find(' ', b);
    if (e == std::string::npos) e = list.size();
    const std::string word = list.substr(b, e - b);
    if (word.size() > 1 && word[0] == '-') unknown.push_back(word.substr(0, word.find('=')));
  }
  if (unknown.empty()) return "";
  // Long options only: any two short ones are within the two edits closest_choice allows.
  std::vector<std::string> long_options;
  for (const auto& o : options)
    if (o.rfind("--", 0) == 0) long_options.push_back(o);
  std::string out;
  for (const auto& u : unknown) {
    const std::string near = u.rfind("--", 0) == 0 ? closest_choice(u, long_options) : "";
    out += (out.empty() ? "" : "; ") + std::string("unknown option '") + u + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?");
  }
  return out;
}

std::string options_file_error_text(const std::string& message, const std::vector<std::string>& options) {
  // CLI11: "INI was not able to parse convert.qaunt" for a key no option of [convert] has.
  const std::string lead = "was not able to parse ";
  const size_t p = message.find(lead);
  if (p == std::string::npos) return "";
  std::string key = message.substr(p + lead.size());
  key = key.substr(0, key.find(' '));
  const size_t dot = key.rfind('.');
  const std::string section = dot == std::string::npos ? "" : key.substr(0, dot), name = key.substr(dot == std::string::npos ? 0 : dot + 1);
  std::vector<std::string> keys;
  for (const auto& o : options)
    if (o.rfind("--", 0) == 0) keys.push_back(o.substr(2));
  const std::string near = closest_choice(name, keys);
  return "--options-file: unknown key '" + name + "'" + (section.empty() ? "" : " under [" + section + "]") +
         (near.empty() ? "" : "; did you mean '" + near + "'?");
}

}  // namespace iris
