// `iris verify` of a seed-engine .iris v1 archive: v1 has no checksums and no quantization
// metadata, so the report holds what can be checked -- every tensor passed the reader's
// structural validation, the file follows the v1 writer's layout conventions -- and says
// that the contents themselves cannot be checked.
#pragma once

#include "formats/iris_v1.h"
#include "verify/verify_report.h"

namespace iris {

VerifyReport verify_v1_structure(const V1Archive& archive);

}  // namespace iris
