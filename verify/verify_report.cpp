#include "verify/verify_report.h"

namespace iris {

bool TensorReport::ok() const {
  for (const auto& c : checks)
    if (!c.ok) return false;
  return true;
}

bool VerifyReport::ok() const { return failures() == 0; }

size_t VerifyReport::failures() const {
  size_t n = 0;
  for (const auto& t : tensors)
    for (const auto& c : t.checks) n += !c.ok;
  for (const auto& f : files) n += !f.ok;
  for (const auto& c : archive) n += !c.ok;
  return n;
}

size_t VerifyReport::warnings() const {
  size_t n = 0;
  for (const auto& t : tensors)
    for (const auto& c : t.checks) n += c.ok && !c.warning.empty();
  for (const auto& c : archive) n += c.ok && !c.warning.empty();  // (a lint of the whole archive)
  return n;
}

void VerifyReport::fail_on_warnings() {
  auto strict = [](CheckResult& c) {
    if (c.ok && !c.warning.empty()) {
      c.ok = false;
      c.detail = c.warning + " (--strict)";
      c.warning.clear();
    }
  };
  for (auto& t : tensors)
    for (auto& c : t.checks) strict(c);
  for (auto& c : archive) strict(c);
}

namespace {

nlohmann::json check_json(const CheckResult& c) {
  nlohmann::json j = {{"check", c.check}, {"ok", c.ok}, {"detail", c.detail}};
  if (!c.warning.empty()) j["warning"] = c.warning;
  return j;
}

}  // namespace

nlohmann::json VerifyReport::to_json() const {
  nlohmann::json tj = nlohmann::json::array();
  for (const auto& t : tensors) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : t.checks) checks.push_back(check_json(c));
    tj.push_back({{"name", t.name}, {"format", t.format}, {"ok", t.ok()}, {"checks", checks}});
  }
  nlohmann::json fj = nlohmann::json::array();
  for (const auto& f : files) fj.push_back({{"file", f.check}, {"ok", f.ok}, {"detail", f.detail}});
  nlohmann::json aj = nlohmann::json::array();
  for (const auto& c : archive) aj.push_back(check_json(c));
  return {{"path", path},       {"device", device}, {"ok", ok()},      {"failures", failures()}, {"warnings", warnings()},
          {"tensors", tj},      {"files", fj},      {"archive", aj},   {"notes", notes}};
}

void VerifyReport::print_text(std::FILE* out, bool verbose) const {
  size_t checks = 0;
  for (const auto& t : tensors) {
    checks += t.checks.size();
    for (const auto& c : t.checks)
      if (!c.ok) std::fprintf(out, "FAIL %s [%s] %s: %s\n", t.name.c_str(), t.format.c_str(), c.check.c_str(), c.detail.c_str());
      else if (!c.warning.empty()) std::fprintf(out, "WARN %s [%s] %s: %s\n", t.name.c_str(), t.format.c_str(), c.check.c_str(), c.warning.c_str());
    if (verbose && t.ok()) std::fprintf(out, "ok   %s [%s] (%zu checks)\n", t.name.c_str(), t.format.c_str(), t.checks.size());
  }
  for (const auto& f : files) {
    ++checks;
    if (!f.ok) std::fprintf(out, "FAIL embedded file %s: %s\n", f.check.c_str(), f.detail.c_str());
  }
  for (const auto& c : archive) {
    ++checks;
    if (!c.ok) std::fprintf(out, "FAIL archive %s: %s\n", c.check.c_str(), c.detail.c_str());
  }
  for (const auto& n : notes) std::fprintf(out, "note: %s\n", n.c_str());
  std::fprintf(out, "%s: %s, %zu tensors, %zu checks, %zu failed, %zu warnings (device %s)\n", path.c_str(), ok() ? "OK" : "FAILED",
               tensors.size(), checks, failures(), warnings(), device.c_str());
}

}  // namespace iris
