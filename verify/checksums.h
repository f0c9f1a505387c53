// Structural verification: every component and embedded file read in full and hashed.
#pragma once

#include <functional>

#include "formats/iris_archive.h"
#include "verify/verify_report.h"

namespace iris {

// Adds "checksum:<role>" checks for every tensor and one per embedded file.
void verify_checksums(const IrisArchive& archive, VerifyReport* report,
                      const std::function<void(uint64_t, uint64_t)>& progress);

// Adds a whole-file "padding" check: every byte outside the preamble, the manifest, the
// components and the embedded files is zero (FORMAT.md section 2), so no bit of the file can
// change unseen. Part of verify_checksums.
void verify_padding(const IrisArchive& archive, VerifyReport* report);

}  // namespace iris
