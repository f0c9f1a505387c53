#include "common/status.h"

namespace iris {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return "usage error";
    case ErrorKind::kInvalidInput: return "invalid input";
    case ErrorKind::kVerifyFailed: return "verification failed";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kNoDevice: return "no device";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

}  // namespace iris
