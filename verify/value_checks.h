// What `verify` can check of a quantized tensor's values without a reference or a GPU: every
// decoded value is finite (a NaN scale or code shows up here), the scales are in range
// (MXFP4 E8M0 0xFF is NaN; bitsandbytes absmax and FP8 scales must be finite; negative
// ones, and zero FP8 scales, pass with a warning), and the tiled padding holds the format's zero code (FORMAT.md 5). The same rows
// on CPU and GPU runners ("values:*" checks).
#pragma once

#include "formats/iris_archive.h"
#include "verify/verify_report.h"

namespace iris {

// Adds "values:finite", "values:scales" and (tiled tensors) "values:padding" to each quantized
// tensor's row of `report` (rows are matched by name; verify_checksums made them).
void verify_values(const IrisArchive& archive, VerifyReport* report);

}  // namespace iris
