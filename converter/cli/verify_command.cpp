#include "converter/cli/verify_command.h"

#include <cstdio>
#include <optional>
#include <tuple>

#include "converter/cli/exit_codes.h"
#include "converter/cli/json_errors.h"
#include "converter/cli/progress.h"
#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "verify/checksums.h"
#include "verify/v1_checks.h"
#include "verify/junit_report.h"
#include "verify/value_checks.h"
#include "converter/inspect/compare.h"
#include "common/atomic_output.h"
#include "converter/pipeline/output_guard.h"
#include "verify/device_checks.h"
#include "converter/shard/verify_ranks.h"
#include "formats/json_text.h"

namespace iris {

int run_verify_command(const VerifyOptions& o) {
  const char* json = o.json ? "verify" : nullptr;
  const nlohmann::json where = {{"path", o.archive}};
  // Options and the --junit file are checked before any work: a typo or an unwritable report
  // fails at once, not after the hashing.
  CompareOptions co;
  for (const auto& [values, option, out] : {std::tuple{&o.max_rel_l2, "--max-rel-l2", &co.max_rel_l2},
                                            std::tuple{&o.min_snr_db, "--min-snr-db", &co.min_snr_db}})
    for (const auto& v : *values) {
      auto l = parse_limit_override(v, option);
      if (!l.is_ok()) return cli_fail(l.status(), json, where);
      out->push_back(*l);
    }
  std::optional<AtomicOutputFile> junit_file;
  if (!o.junit_path.empty()) {
    Status s = refuse_input_as_output(o.junit_path, {o.archive}, "--junit");
    if (!s.is_ok()) return cli_fail(s, json, where);
    auto f = AtomicOutputFile::create(o.junit_path, o.overwrite);
    if (!f.is_ok()) return cli_fail(f.status(), json, where);
    junit_file = std::move(*f);
  }
  auto junit = [&](const std::string& xml) -> int {
    if (!junit_file) return 0;
    Status s = junit_file->append({reinterpret_cast<const uint8_t*>(xml.data()), xml.size()});
    if (s.is_ok()) s = junit_file->commit();
    return s.is_ok() ? 0 : cli_fail(s, json, where);
  };
  if (is_iris_v1_archive(o.archive)) {
    // The seed engine's v1: no checksums and no formats, so structural checks only (the
    // reader's own validation, then the writer's conventions), said in the report.
    if (o.device == "cuda" || !o.against.empty())
      return cli_fail(unsupported(o.archive + ": a .iris v1 archive has no quantization metadata: --device cuda and --against need v2 "
                                              "(iris convert it first)"),
                      json, where);
    auto v1 = V1Archive::open(o.archive);
    if (!v1.is_ok()) {
      if (int rc = junit(junit_xml_open_failure(o.archive, v1.status()))) return rc;
      return cli_fail(v1.status(), json, where);
    }
    VerifyReport report = verify_v1_structure(*v1);
    if (int rc = junit(junit_xml(report))) return rc;
    if (o.json) std::printf("%s\n", dump_json(report.to_json(), 2).c_str());
    else report.print_text(stdout, o.verbose);
    return report.ok() ? 0 : int(kExitVerifyFailed);
  }
  auto archive = IrisArchive::open(o.archive);
  if (!archive.is_ok()) {
    // A header or manifest that does not validate: the archive is corrupt or not one.
    if (int rc = junit(junit_xml_open_failure(o.archive, archive.status()))) return rc;
    return cli_fail(archive.status(), json, where);
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
    if (!s.is_ok()) return cli_fail(s.with_context("--device cuda: "), json, where);
  }
  if (!o.against.empty()) {
    auto source = WeightSet::open(o.against);
    if (!source.is_ok()) return cli_fail(source.status().with_context("--against: "), json, where);
    // The archive already open and checked is the one compared.
    auto mine = WeightSet::from_archive(std::move(*archive));
    auto rows = compare_weights(*mine, **source, co);
    if (!rows.is_ok()) return cli_fail(rows.status(), json, where);
    add_against_checks(*rows, co, &report);
  }
  if (o.strict) report.fail_on_warnings();
  if (int rc = junit(junit_xml(report))) return rc;
  if (o.json) std::printf("%s\n", dump_json(report.to_json(), 2).c_str());
  else report.print_text(stdout, o.verbose);
  return report.ok() ? 0 : int(kExitVerifyFailed);
}

int run_diff_command(const DiffOptions& o) {
  auto fail_with = [&](const Status& s) { return cli_fail(s, o.json ? "diff" : nullptr); };
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
    std::printf("%s\n", dump_json({{"ok", true}, {"a", o.a}, {"b", o.b}, {"tensors", t}}, 2).c_str());
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

namespace iris {

int run_verify_ranks_command(const std::string& folder, const std::string& against, const std::string& device, bool json) {
  const nlohmann::json where = {{"path", folder}};
  auto r = verify_ranks({folder, against, device});
  if (!r.is_ok()) return cli_fail(r.status(), json ? "verify" : nullptr, where);
  if (json) {
    auto j = r->to_json();
    j["path"] = folder;
    std::printf("%s\n", dump_json(j, 2).c_str());
  } else {
    for (const auto& f : r->failures) std::printf("FAIL %s\n", f.c_str());
    const std::string compared = against.empty() ? "" : ", " + std::to_string(r->compared) + " compared with " + against + " bit for bit";
    const std::string gpu = device == "cuda" ? ", " + std::to_string(r->gpu_checks) + " GPU checks (dequant bit for bit, GEMV within its bound)" : "";
    std::fprintf(stderr, "%s: %s, %u ranks, %llu logical tensors in %llu boxes (%llu replicas)%s%s\n", folder.c_str(),
                 r->ok() ? "OK" : "FAILED", r->world, (unsigned long long)r->logical_tensors, (unsigned long long)r->boxes,
                 (unsigned long long)r->replicas, compared.c_str(), gpu.c_str());
  }
  return r->ok() ? kExitOk : kExitVerifyFailed;
}

}  // namespace iris
