#include "converter/pipeline/quality.h"

#include <cmath>
#include <limits>

namespace iris {

void QualityStats::add(const float* ref, const float* got, uint64_t n) {
  quant::add_error_sums(ref, got, n, this);
  count += n;
}

void QualityStats::merge(const QualityStats& o) {
  ErrorSums::merge(o);
  count += o.count;
}

double QualityStats::rel_l2() const {
  if (sum_sq_ref == 0) return sum_sq_err == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(sum_sq_err / sum_sq_ref);
}

double QualityStats::snr_db() const {
  if (sum_sq_err == 0) return std::numeric_limits<double>::infinity();
  if (sum_sq_ref == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_ref / sum_sq_err);
}

nlohmann::json QualityStats::to_json() const {
  auto num = [](double v) -> nlohmann::json { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(v > 0 ? "inf" : "-inf"); };
  return {{"rel_l2", num(rel_l2())}, {"max_abs_err", max_abs_err}, {"snr_db", num(snr_db())}, {"elements", count}};
}

}  // namespace iris
