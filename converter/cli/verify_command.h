// `iris verify`: runs the checks of verify/ on an archive and prints the report.
#pragma once

#include <string>
#include <vector>

namespace iris {

struct VerifyOptions {
  std::string archive;
  std::string device = "cpu";
  bool json = false;
  bool verbose = false;
  bool show_progress = true;
  std::string junit_path;  // --junit FILE: JUnit XML, written atomically
  std::string against;     // --against SRC: compare every tensor with a snapshot or archive
  std::vector<std::string> max_rel_l2, min_snr_db;  // [REGEX=]VALUE overrides of the limits
  bool overwrite = false;  // --force: replace an existing --junit file
  bool strict = false;     // --strict: checks that passed with a warning fail
};

// Returns the process exit code (0 all checks passed, 4 a check failed, 3 corrupt header...).
int run_verify_command(const VerifyOptions& options);
// `iris verify --ranks DIR [--against WHOLE]` (converter/shard/verify_ranks.h): the same exit codes.
int run_verify_ranks_command(const std::string& folder, const std::string& against, const std::string& device, bool json);

struct DiffOptions {
  std::string a, b;
  bool json = false;
};
// `iris diff A B`: per-tensor statistics of A against B (archives or snapshots). Exit 0 when the
// comparison ran (whatever it found), else the error's exit code.
int run_diff_command(const DiffOptions& options);

}  // namespace iris
