// Error statistics of a requantized tensor against its source values, accumulated in
// double over streamed chunks: relative L2 error, max absolute error and SNR in dB.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "quant/error_sums.h"

namespace iris {

struct QualityStats : quant::ErrorSums {
  uint64_t count = 0;

  void add(const float* ref, const float* got, uint64_t n);
  void merge(const QualityStats& o);
  double rel_l2() const;   // ||got - ref|| / ||ref||; 0 when both are 0
  double snr_db() const;   // 10 log10(||ref||^2 / ||err||^2); +inf when exact
  nlohmann::json to_json() const;
};

}  // namespace iris
