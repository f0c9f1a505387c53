// `iris verify`: runs the checks of verify/ on an archive and prints the report.
#pragma once

#include <string>

namespace iris {

struct VerifyOptions {
  std::string archive;
  std::string device = "cpu";
  bool json = false;
  bool verbose = false;
  bool show_progress = true;
};

// Returns the process exit code (0 all checks passed, 4 a check failed, 3 corrupt header...).
int run_verify_command(const VerifyOptions& options);

}  // namespace iris
