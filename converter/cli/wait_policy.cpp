#include "converter/cli/wait_policy.h"

#include "iris_build_info.h"  // IRIS_GIT_COMMIT, generated at build time

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
  const std::string targets = IRIS_CUDA_TARGETS;
  std::string text = version;
  text += " (commit ";
  text += IRIS_GIT_COMMIT;
  text += targets.empty() ? "; no CUDA kernels: built without the CUDA toolkit" : "; CUDA kernels for ";
  text += targets;
  text += "; OpenMP: waiting threads ";
  text += policy && *policy ? policy : "as libgomp's default";
  text += ")";
  return text;
}

}  // namespace iris
