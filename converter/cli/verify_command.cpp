#include "converter/cli/verify_command.h"

#include <cstdio>

#include "converter/cli/exit_codes.h"
#include "converter/cli/progress.h"
#include "formats/iris_archive.h"
#include "verify/checksums.h"
#include "verify/device_checks.h"

namespace iris {

int run_verify_command(const VerifyOptions& o) {
  auto archive = IrisArchive::open(o.archive);
  if (!archive.is_ok()) {
    // A header or manifest that does not validate: the archive is corrupt or not one.
    std::fprintf(stderr, "iris: error: %s\n", archive.status().message().c_str());
    if (o.json) {
      nlohmann::json j = {{"path", o.archive}, {"ok", false}, {"error", archive.status().message()}};
      std::printf("%s\n", j.dump(2).c_str());
    }
    return exit_code(archive.status().kind());
  }
  VerifyReport report;
  report.path = o.archive;
  report.device = o.device;
  {
    ProgressBar bar("verify", o.show_progress && !o.json);
    verify_checksums(*archive, &report, [&](uint64_t d, uint64_t t) { bar.update(d, t); });
  }
  if (o.device == "cuda") {
    Status s = run_device_checks(*archive, &report);
    if (!s.is_ok()) {
      std::fprintf(stderr, "iris: error: --device cuda: %s\n", s.message().c_str());
      return exit_code(s.kind());
    }
  }
  if (o.json) std::printf("%s\n", report.to_json().dump(2).c_str());
  else report.print_text(stdout, o.verbose);
  return report.ok() ? 0 : int(kExitVerifyFailed);
}

}  // namespace iris
