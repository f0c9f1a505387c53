// GPU checks for `iris verify --device cuda`: each quantized tensor through the CUDA dequant
// kernel, compared bit for bit with the CPU reference decode.
#pragma once

#include "common/status.h"
#include "formats/iris_archive.h"
#include "verify/verify_report.h"

namespace iris {

// Adds "gpu:*" checks to `report`. Fails with ErrorKind::kNoDevice when this build has no
// CUDA kernels or no GPU is visible.
Status run_device_checks(const IrisArchive& archive, VerifyReport* report);

}  // namespace iris
