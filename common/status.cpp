#include "common/status.h"

namespace iris {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kAlreadyExists: return "already exists";
    case ErrorKind::kInvalidInput: return "invalid input";
    case ErrorKind::kCorrupt: return "corrupt data";
    case ErrorKind::kVerifyFailed: return "verification failed";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kNoDevice: return "no device";
    case ErrorKind::kDevice: return "device error";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

}  // namespace iris
