// Errors for machines: with --json, a failing command prints this object on stdout as well as
// the one-line message on stderr, so a CI job parsing stdout never sees an empty document.
// Schema (docs/JSON.md): {"ok": false, "command": "...", "error": {"kind", "exit_code", "message"}}.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "converter/cli/exit_codes.h"

namespace iris {

inline nlohmann::json json_error(const std::string& command, const Status& s) {
  return {{"ok", false},
          {"command", command},
          {"error", {{"kind", error_kind_name(s.kind())}, {"exit_code", exit_code(s.kind())}, {"message", s.message()}}}};
}

inline void print_json_error(const std::string& command, const Status& s) {
  std::printf("%s\n", json_error(command, s).dump(2).c_str());
}

}  // namespace iris
