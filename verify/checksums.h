// Structural verification: every component and embedded file read in full and hashed.
#pragma once

#include <functional>

#include "formats/iris_archive.h"
#include "verify/verify_report.h"

namespace iris {

// Adds "checksum:<role>" checks for every tensor and one per embedded file.
void verify_checksums(const IrisArchive& archive, VerifyReport* report,
                      const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace iris
