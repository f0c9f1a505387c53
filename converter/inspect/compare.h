// Tensor-by-tensor comparison of two weight sets (an archive against its source snapshot, or
// any two of archives and snapshots): names, shapes, and the decoded values. The engine of
// `iris verify --against` (a gate with thresholds) and `iris diff` (statistics for review).
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/status.h"
#include "converter/pipeline/quality.h"
#include "converter/pipeline/weight_sets.h"
#include "verify/verify_report.h"

namespace iris {

// A bound on the error of a requantized tensor. Defaults per target format (default_limits)
// are met with margin by iris's encoders on every fixture and failed by a wrong scale (one
// exponent off: rel L2 >= 0.5) or swapped tensors (rel L2 ~ 1.4); see docs/VERIFY.md.
struct Limits {
  double max_rel_l2 = 0;
  double min_snr_db = 0;
};
Limits default_limits(const std::string& storage);

// "[REGEX=]VALUE" overrides with convert --rule's semantics: a REGEX (ECMAScript, searched in
// the tensor name: anchor it with ^ and $ for a whole-name match) gives its VALUE to the tensors
// it matches, the first matching one winning; a bare VALUE applies to every tensor no REGEX
// matched (the last bare one, if several).
struct LimitOverride {
  std::optional<std::regex> pattern;
  std::string text;
  double value = 0;
};
Result<LimitOverride> parse_limit_override(const std::string& spec, const char* option);
// The limit for tensor `name`: as above, else `fallback` (the format's default).
double limit_for(const std::vector<LimitOverride>& overrides, const std::string& name, double fallback);

struct CompareOptions {
  std::vector<LimitOverride> max_rel_l2, min_snr_db;
  uint64_t chunk_values = 1u << 22;  // values decoded per side at a time (memory bound)
};

struct TensorComparison {
  std::string name, format_a, format_b;
  std::vector<uint64_t> shape_a, shape_b;
  bool in_a = false, in_b = false;
  bool compared = false;       // both present, same shape, both decodable
  bool bit_identical = false;  // every FP32 value equal bit for bit (NaNs as NaNs)
  QualityStats stats;          // A's values against B's (B the reference)
  std::string error;           // a decode failure (corrupt data, ...)
};

// Compares every tensor of `a` with the tensor of the same name in `b`.
Result<std::vector<TensorComparison>> compare_weights(const WeightSet& a, const WeightSet& b, const CompareOptions& options);

// The gate: a verify row per tensor. Missing, extra, reshaped or undecodable tensors fail;
// a tensor stored in the same format on both sides must be bit-identical; a requantized one
// must meet its limits. Adds rows to `report`.
void add_against_checks(const std::vector<TensorComparison>& rows, const CompareOptions& options, VerifyReport* report);

}  // namespace iris
