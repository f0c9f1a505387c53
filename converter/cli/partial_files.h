// The command line's cleanup of partial output files on SIGINT/SIGTERM/SIGHUP: the process
// owns its signal handlers, so this registry lives in the tool, not in the library (which only
// sees the PartialFileRegistry interface of common/atomic_output.h).
#pragma once

#include "common/atomic_output.h"

namespace iris {

// Installs the handlers (once) and returns the registry they read: every partial file
// registered there is unlinked before the signal's default action runs.
PartialFileRegistry* install_partial_file_cleanup();

}  // namespace iris
