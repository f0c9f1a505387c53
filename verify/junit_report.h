// A verify report as JUnit XML, the format CI systems (GitLab, Jenkins, GitHub test reporters)
// show natively: one testsuite per archive, one testcase per tensor and check (classname the
// tensor, name the check), plus the embedded files and whole-file checks. A failing check
// carries its detail as the failure message.
#pragma once

#include <string>

#include "common/status.h"
#include "verify/verify_report.h"

namespace iris {

std::string junit_xml(const VerifyReport& report);
// For an archive that could not be opened at all: one failing testcase "open".
std::string junit_xml_open_failure(const std::string& path, const Status& status);

}  // namespace iris
