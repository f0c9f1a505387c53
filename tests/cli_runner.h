// Runs the real `iris` binary and captures its exit code and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "tests/test_paths.h"

namespace iris::testing_cli {

struct Run {
  int rc;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line and captures what it prints on stdout.
inline Run run_shell(const std::string& cmd) {
  Run r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// `env` is prefixed to the command ("NAME=value ...").
inline Run run_env(const std::string& env, const std::string& args) {
  return run_shell(env + " " + test_paths::iris_binary() + " " + args + " 2>&1");
}

inline Run run(const std::string& args) { return run_env("", args); }

// Standard output alone (standard error discarded): what a program parsing it would see.
inline Run run_stdout(const std::string& args) { return run_shell(test_paths::iris_binary() + " " + args + " 2>/dev/null"); }

}  // namespace iris::testing_cli
