#include "converter/cli/wait_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace iris {

void ensure_passive_waiting(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or our re-exec
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: then run with libgomp's default
  unsetenv("OMP_WAIT_POLICY");
}

std::string version_text(const char* version) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return std::string(version) + " (OpenMP: waiting threads " + (policy && *policy ? policy : "as libgomp's default") + ")";
}

}  // namespace iris
