// `iris inspect`: what an archive, a snapshot or a safetensors file holds.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace iris {

// An opened archive, snapshot or safetensors file, described one tensor at a time: a
// description of 10^6 tensors as one JSON document took 5 GB (issue 24 item 10), so the CLI
// renders it tensor by tensor (converter/cli/report_print.h).
class Inspection {
 public:
  static Result<Inspection> open(const std::string& path);

  // Every key of the description but "tensors" (kind, path, totals, formats, files, ...).
  const nlohmann::json& summary() const { return summary_; }
  size_t tensor_count() const { return count_; }
  // Tensor i of the description's "tensors" list, built on demand.
  nlohmann::json tensor(size_t i) const { return tensor_(i); }
  // What the text table shows of tensor(i), each field as printed. A snapshot's rows are made
  // without the JSON (its source record, a map per field): building 10^6 of them took a fifth
  // of `iris inspect` (issue 24 item 10).
  struct Row {
    std::string name, shape, format, dtype, layout;
    uint64_t bytes = 0, offset = 0;
    std::string params;  // compact JSON; empty when the tensor has none
  };
  Row row(size_t i) const { return row_ ? row_(i) : row_of(tensor(i)); }
  static Row row_of(const nlohmann::json& tensor);
  // The longest tensor name in bytes (the text table's first column).
  size_t longest_name() const { return longest_name_; }
  // The whole description as one document: summary() plus "tensors".
  nlohmann::json to_json() const;

 private:
  nlohmann::json summary_;
  size_t count_ = 0, longest_name_ = 0;
  std::function<nlohmann::json(size_t)> tensor_;  // owns what it reads (shared_ptr captures)
  std::function<Row(size_t)> row_;                // the same, or empty: row_of(tensor(i))
  friend struct InspectionBuilder;
};

// Inspection::open(path)->to_json().
Result<nlohmann::json> inspect_path(const std::string& path);

}  // namespace iris
