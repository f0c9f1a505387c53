// Built when CUDA is not: --device cuda says so and exits with the no-device code.
#include "verify/device_checks.h"

namespace iris {

Status run_device_checks(const IrisArchive&, VerifyReport*) {
  return Status::error(ErrorKind::kNoDevice, "this iris was built without CUDA (configure with -DIRIS_CUDA=ON)");
}

}  // namespace iris
