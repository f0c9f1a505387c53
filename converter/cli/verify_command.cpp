#include "converter/cli/verify_command.h"

#include <cstdio>
#include <filesystem>

#include "converter/cli/exit_codes.h"
#include "converter/cli/json_errors.h"
#include "converter/cli/progress.h"
#include "formats/iris_archive.h"
#include "verify/checksums.h"
#include "verify/junit_report.h"
#include "verify/value_checks.h"
#include "converter/compare.h"
#include "common/atomic_output.h"
#include "verify/device_checks.h"

namespace iris {

namespace {

Status write_text_atomically(const std::string& path, const std::string& text, bool overwrite) {
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile f, AtomicOutputFile::create(path, overwrite));
  IRIS_TRY(f.append({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return f.commit();
}

}  // namespace

int run_verify_command(const VerifyOptions& o) {
  // The --junit file is checked first: a report that cannot be written fails before any work.
  if (!o.junit_path.empty()) {
    std::error_code ec;
    if (!o.overwrite && std::filesystem::exists(std::filesystem::symlink_status(o.junit_path, ec))) {
      Status s = already_exists(o.junit_path + ": already exists");
      std::fprintf(stderr, "iris: error: %s\n", cli_message(s).c_str());
      if (o.json) print_json_error("verify", s);
      return exit_code(s.kind());
    }
    if (std::filesystem::exists(o.junit_path, ec) && std::filesystem::equivalent(o.junit_path, o.archive, ec)) {
      Status s = invalid_argument("--junit '" + o.junit_path + "' is the archive; refusing to replace it");
      std::fprintf(stderr, "iris: error: %s\n", s.message().c_str());
      if (o.json) print_json_error("verify", s);
      return exit_code(s.kind());
    }
  }
  auto junit = [&](const std::string& xml) -> int {
    if (o.junit_path.empty()) return 0;
    Status s = write_text_atomically(o.junit_path, xml, o.overwrite);
    if (s.is_ok()) return 0;
    std::fprintf(stderr, "iris: error: %s\n", cli_message(s).c_str());
    return exit_code(s.kind());
  };
  auto fail_with = [&](const Status& s) -> int {
    std::fprintf(stderr, "iris: error: %s\n", cli_message(s).c_str());
    if (o.json) print_json_error("verify", s);
    return exit_code(s.kind());
  };
  auto archive = IrisArchive::open(o.archive);
  if (!archive.is_ok()) {
    if (int rc = junit(junit_xml_open_failure(o.archive, archive.status()))) return rc;
    // A header or manifest that does not validate: the archive is corrupt or not one.
    std::fprintf(stderr, "iris: error: %s\n", archive.status().message().c_str());
    if (o.json) {
      nlohmann::json j = json_error("verify", archive.status());
      j["path"] = o.archive;
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
  verify_values(*archive, &report);  // on every runner, GPU or not
  if (o.device == "cuda") {
    Status s = run_device_checks(*archive, &report);
    if (!s.is_ok()) {
      std::fprintf(stderr, "iris: error: --device cuda: %s\n", s.message().c_str());
      if (o.json) print_json_error("verify", s.with_context("--device cuda: "));
      return exit_code(s.kind());
    }
  }
  if (!o.against.empty()) {
    CompareOptions co;
    for (const auto& v : o.max_rel_l2) {
      auto l = parse_limit_override(v, "--max-rel-l2");
      if (!l.is_ok()) return fail_with(l.status());
      co.max_rel_l2.push_back(*l);
    }
    for (const auto& v : o.min_snr_db) {
      auto l = parse_limit_override(v, "--min-snr-db");
      if (!l.is_ok()) return fail_with(l.status());
      co.min_snr_db.push_back(*l);
    }
    auto mine = WeightSet::open(o.archive);
    if (!mine.is_ok()) return fail_with(mine.status());
    auto source = WeightSet::open(o.against);
    if (!source.is_ok()) return fail_with(source.status().with_context("--against: "));
    auto rows = compare_weights(**mine, **source, co);
    if (!rows.is_ok()) return fail_with(rows.status());
    add_against_checks(*rows, co, &report);
  }
  if (int rc = junit(junit_xml(report))) return rc;
  if (o.json) std::printf("%s\n", report.to_json().dump(2).c_str());
  else report.print_text(stdout, o.verbose);
  return report.ok() ? 0 : int(kExitVerifyFailed);
}

int run_diff_command(const DiffOptions& o) {
  auto fail_with = [&](const Status& s) -> int {
    std::fprintf(stderr, "iris: error: %s\n", cli_message(s).c_str());
    if (o.json) print_json_error("diff", s);
    return exit_code(s.kind());
  };
  auto a = WeightSet::open(o.a);
  if (!a.is_ok()) return fail_with(a.status());
  auto b = WeightSet::open(o.b);
  if (!b.is_ok()) return fail_with(b.status());
  auto rows = compare_weights(**a, **b, CompareOptions{});
  if (!rows.is_ok()) return fail_with(rows.status());
  if (o.json) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& r : *rows) {
      nlohmann::json j = {{"name", r.name}, {"in_a", r.in_a}, {"in_b", r.in_b}, {"format_a", r.format_a}, {"format_b", r.format_b},
                          {"shape_a", r.shape_a}, {"shape_b", r.shape_b}, {"compared", r.compared}};
      if (r.compared) {
        j["bit_identical"] = r.bit_identical;
        j["stats"] = r.stats.to_json();
      }
      if (!r.error.empty()) j["error"] = r.error;
      t.push_back(std::move(j));
    }
    std::printf("%s\n", nlohmann::json({{"ok", true}, {"a", o.a}, {"b", o.b}, {"tensors", t}}).dump(2).c_str());
    return 0;
  }
  std::printf("%-48s %-9s %-9s %10s %9s %11s\n", "tensor", "A", "B", "rel L2", "SNR dB", "max |err|");
  for (const auto& r : *rows) {
    if (!r.in_a || !r.in_b) {
      std::printf("%-48s %-9s %-9s %s\n", r.name.c_str(), r.in_a ? r.format_a.c_str() : "-", r.in_b ? r.format_b.c_str() : "-",
                  r.in_a ? "only in A" : "only in B");
    } else if (!r.compared) {
      std::printf("%-48s %-9s %-9s %s\n", r.name.c_str(), r.format_a.c_str(), r.format_b.c_str(),
                  !r.error.empty() ? r.error.c_str() : r.shape_a != r.shape_b ? "shapes differ" : "not comparable");
    } else if (r.bit_identical) {
      std::printf("%-48s %-9s %-9s %10s\n", r.name.c_str(), r.format_a.c_str(), r.format_b.c_str(), "identical");
    } else {
      std::printf("%-48s %-9s %-9s %10.4g %9.2f %11.4g\n", r.name.c_str(), r.format_a.c_str(), r.format_b.c_str(), r.stats.rel_l2(),
                  r.stats.snr_db(), r.stats.max_abs_err);
    }
  }
  return 0;
}

}  // namespace iris
