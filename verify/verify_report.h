// The result of `iris verify`: per tensor, a list of named checks. Structural checks and
// checksums come first; device and source comparisons add their own checks to the same rows.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace iris {

struct CheckResult {
  std::string check;   // "checksum:codes", "gpu:dequant", ...
  bool ok = true;
  std::string detail;  // empty when ok, else what differs
  // Set on a check that passed but found something a reviewer should see (negative or zero
  // FP8 scales: well defined, yet rarely meant). `--strict` turns warnings into failures.
  std::string warning = {};
};

struct TensorReport {
  std::string name;
  std::string format;
  std::vector<CheckResult> checks;
  bool ok() const;
};

struct VerifyReport {
  std::string path;
  std::string device = "cpu";
  std::vector<TensorReport> tensors;
  std::vector<CheckResult> files;  // embedded files
  std::vector<CheckResult> archive;  // whole-file checks: padding, unaccounted bytes
  std::vector<std::string> notes;    // what the checks could not cover (v1: no checksums)
  bool ok() const;
  size_t failures() const;
  size_t warnings() const;
  // --strict: every check that passed with a warning fails, its warning as the detail.
  void fail_on_warnings();
  nlohmann::json to_json() const;
  // One line per failing check and per warning, then a summary line. `verbose` lists passing tensors too.
  void print_text(std::FILE* out, bool verbose) const;
};

}  // namespace iris
