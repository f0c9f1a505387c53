// How the command line's OpenMP threads wait. libgomp's default spins while a worker waits
// for work or at a barrier, and reads its policy from the environment once, when it is
// loaded (before main, with no call to change it later). On a busy machine (a CI runner, a
// host whose cores run other jobs) the spinning workers take the CPU from those that hold
// the work: small conversions ran 7-20x slower than with OMP_WAIT_POLICY=passive, while on an
// idle machine passive costs nothing measurable (docs/BENCHMARKS.md, issue 24).
#pragma once

#include <string>

namespace iris {

// If OMP_WAIT_POLICY is unset, sets it to "passive" and executes this program again with the
// same arguments, so libgomp starts with it; returns only when nothing was done (the user
// chose a policy, this is the re-executed process, or exec failed: then iris runs as it is).
void ensure_passive_waiting(char** argv);

// "VERSION (OpenMP: waiting threads POLICY)": what `iris --version` prints, so a log shows
// the policy a run had.
std::string version_text(const char* version);

}  // namespace iris
