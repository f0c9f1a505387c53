// Errors for machines: with --json, a failing command prints this object on stdout as well as
// the one-line message on stderr, so a CI job parsing stdout never sees an empty document.
// Schema (docs/JSON.md): {"ok": false, "command": "...", "error": {"kind", "exit_code", "message"}}.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/json_text.h"
#include "common/status.h"
#include "converter/cli/exit_codes.h"

namespace iris {

inline nlohmann::json json_error(const std::string& command, const Status& s) {
  return {{"ok", false},
          {"command", command},
          {"error", {{"kind", error_kind_name(s.kind())}, {"exit_code", exit_code(s.kind())}, {"message", s.message()}}}};
}

inline void print_json_error(const std::string& command, const Status& s, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j = json_error(command, s);
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = *it;
  std::printf("%s\n", dump_json(j, 2).c_str());
}

// How every command fails: "iris: error: ..." lines on stderr, with --json (a non-null
// `json_command`) the error object on stdout too; returns the exit code.
inline int cli_fail(const Status& s, const char* json_command = nullptr, const nlohmann::json& extra = nlohmann::json::object()) {
  if (json_command) print_json_error(json_command, s, extra);
  const std::string text = cli_message(s);
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    std::fprintf(stderr, "iris: error: %s\n", text.substr(begin, end - begin).c_str());
    begin = end + 1;
  }
  return exit_code(s.kind());
}

}  // namespace iris
