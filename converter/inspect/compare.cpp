#include "converter/inspect/compare.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

#include "formats/tensor_decode.h"
#include "common/float_bits.h"

namespace iris {

Limits default_limits(const std::string& storage) {
  // Measured on every fixture conversion (docs/VERIFY.md, docs/cpu-runs/2026-11-23-verify-limits.txt;
  // bnb_fp4 shares nf4's limits unmeasured: iris has no FP4 encoder): iris's encoders reach rel L2 at
  // most 0.166 (mxfp4), 0.145 (nf4), 0.036 (fp8) and 0.0019 (bf16), SNR at least 15.6, 16.8,
  // 28.9 and 54.6 dB. The limits leave 1.5x or more of margin and stay well below the 0.5 that
  // a scale one exponent off gives (1.41 for swapped tensors).
  if (storage == "mxfp4") return {0.25, 12};
  if (storage == "nf4" || storage == "bnb_fp4") return {0.22, 13};
  if (storage == "fp8_e4m3") return {0.06, 24};
  if (storage == "bf16" || storage == "f16") return {0.01, 40};
  return {1e-6, 120};
}

Result<LimitOverride> parse_limit_override(const std::string& spec, const char* option) {
  LimitOverride o;
  o.text = spec;
  std::string value = spec;
  if (auto eq = spec.rfind('='); eq != std::string::npos) {
    try {
      o.pattern = std::regex(spec.substr(0, eq));
    } catch (const std::regex_error& e) {
      return usage_error(std::string(option) + " '" + spec + "': invalid regular expression: " + e.what());
    }
    value = spec.substr(eq + 1);
  }
  char* end = nullptr;
  o.value = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(o.value))
    return usage_error(std::string(option) + " '" + spec + "': expected [REGEX=]NUMBER");
  return o;
}

double limit_for(const std::vector<LimitOverride>& overrides, const std::string& name, double fallback) {
  for (const auto& o : overrides)
    if (o.pattern && std::regex_search(name, *o.pattern)) return o.value;  // first match wins, as convert --rule
  double v = fallback;
  for (const auto& o : overrides)
    if (!o.pattern) v = o.value;  // the last bare value is every other tensor's
  return v;
}

namespace {

bool same_bits(const float* a, const float* b, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    if (f32_bits(a[i]) != f32_bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}


std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

Result<std::vector<TensorComparison>> compare_weights(const WeightSet& a, const WeightSet& b, const CompareOptions& o) {
  std::unordered_map<std::string, size_t> in_b;
  for (size_t i = 0; i < b.tensors().size(); ++i) in_b.emplace(b.tensors()[i].name, i);
  std::vector<TensorComparison> rows;
  std::vector<bool> b_seen(b.tensors().size(), false);
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorDesc& da = a.tensors()[i];
    TensorComparison r;
    r.name = da.name;
    r.in_a = true;
    r.format_a = storage_name(da);
    r.shape_a = da.shape;
    auto it = in_b.find(da.name);
    if (it != in_b.end()) {
      const size_t j = it->second;
      b_seen[j] = true;
      const TensorDesc& db = b.tensors()[j];
      r.in_b = true;
      r.format_b = storage_name(db);
      r.shape_b = db.shape;
      if (da.shape == db.shape && a.decodable(i) && b.decodable(j)) {
        const RowView rv = row_view(da);  // rows x K, as both decoders count them
        const uint64_t k = rv.k, rows_total = rv.rows;
        const uint64_t step = std::max<uint64_t>(1, o.chunk_values / std::max<uint64_t>(k, 1));
        std::vector<float> va, vb;
        r.bit_identical = true;
        for (uint64_t r0 = 0; r0 < rows_total && r.error.empty(); r0 += step) {
          const uint64_t r1 = std::min(rows_total, r0 + step), n = (r1 - r0) * k;
          va.resize(n);
          vb.resize(n);
          Status s = a.decode_rows(i, r0, r1, va.data());
          if (s.is_ok()) s = b.decode_rows(j, r0, r1, vb.data());
          if (!s.is_ok()) {
            r.error = s.message();
            break;
          }
          r.bit_identical = r.bit_identical && same_bits(va.data(), vb.data(), n);
          r.stats.add(vb.data(), va.data(), n);
        }
        r.compared = r.error.empty();
      }
    }
    rows.push_back(std::move(r));
  }
  for (size_t j = 0; j < b.tensors().size(); ++j)
    if (!b_seen[j]) {
      TensorComparison r;
      r.name = b.tensors()[j].name;
      r.in_b = true;
      r.format_b = storage_name(b.tensors()[j]);
      r.shape_b = b.tensors()[j].shape;
      rows.push_back(std::move(r));
    }
  return rows;
}

void add_against_checks(const std::vector<TensorComparison>& rows, const CompareOptions& o, VerifyReport* report) {
  auto shape = [](const std::vector<uint64_t>& s) { return nlohmann::json(s).dump(); };
  std::unordered_map<std::string, size_t> row_of;
  for (size_t i = 0; i < report->tensors.size(); ++i) row_of.emplace(report->tensors[i].name, i);
  for (const auto& r : rows) {
    auto [it, fresh] = row_of.emplace(r.name, report->tensors.size());
    if (fresh) report->tensors.push_back({r.name, r.in_a ? r.format_a : r.format_b, {}});
    TensorReport* tr = &report->tensors[it->second];
    CheckResult c{"against", true, ""};
    if (!r.in_a) {
      c = {"against:present", false, "in the source (" + r.format_b + " " + shape(r.shape_b) + ") but missing from the archive"};
    } else if (!r.in_b) {
      c = {"against:present", false, "in the archive but not in the source (extra or renamed)"};
    } else if (r.shape_a != r.shape_b) {
      c = {"against:shape", false, "shape " + shape(r.shape_a) + " but the source has " + shape(r.shape_b)};
    } else if (!r.error.empty()) {
      c = {"against:decode", false, r.error};
    } else if (!r.compared) {
      c = {"against:decode", false, "cannot be decoded to compare (" + r.format_a + " against " + r.format_b + ")"};
    } else if (r.format_a == r.format_b) {
      c = {"against:identical", r.bit_identical, ""};
      if (!r.bit_identical)
        c.detail = "stored as " + r.format_a + " on both sides but the values differ (rel L2 " + fmt(r.stats.rel_l2()) +
                   ", max abs error " + fmt(r.stats.max_abs_err) + ")";
    } else {
      const Limits def = default_limits(r.format_a);
      const double max_rel = limit_for(o.max_rel_l2, r.name, def.max_rel_l2), min_snr = limit_for(o.min_snr_db, r.name, def.min_snr_db);
      const double rel = r.stats.rel_l2(), snr = r.stats.snr_db();
      c = {"against:error", rel <= max_rel && snr >= min_snr, ""};
      c.detail = r.format_b + " -> " + r.format_a + ": rel L2 " + fmt(rel) + " (limit " + fmt(max_rel) + "), SNR " + fmt(snr) +
                 " dB (limit " + fmt(min_snr) + "), max abs error " + fmt(r.stats.max_abs_err);
      if (c.ok) c.detail.clear();
    }
    tr->checks.push_back(std::move(c));
  }
}

}  // namespace iris
