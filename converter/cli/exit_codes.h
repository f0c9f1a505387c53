// The command line's documented exit codes (README "Exit codes"), from the library's
// semantic error kinds. The one place that knows both.
#pragma once

#include "common/status.h"

namespace iris {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 2,        // bad options; output exists without --force
  kExitInvalidInput = 3, // invalid or corrupt input
  kExitVerifyFailed = 4,
  kExitIo = 5,
  kExitNoDevice = 6,
  kExitUnsupported = 7,
  kExitInternal = 70,
};

inline int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kAlreadyExists: return kExitUsage;
    case ErrorKind::kInvalidInput:
    case ErrorKind::kCorrupt: return kExitInvalidInput;
    case ErrorKind::kVerifyFailed: return kExitVerifyFailed;
    case ErrorKind::kIo:
    case ErrorKind::kDevice: return kExitIo;
    case ErrorKind::kNoDevice: return kExitNoDevice;
    case ErrorKind::kUnsupported: return kExitUnsupported;
    case ErrorKind::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

// The one-line message the CLI prints for a status: the library's text, plus the option
// that would change the outcome where there is one.
inline std::string cli_message(const Status& s) {
  if (s.kind() == ErrorKind::kAlreadyExists) return s.message() + " (use --force to replace it)";
  return s.message();
}

}  // namespace iris
