// Human-readable renderings: the --dry-run plan, the quality summary, the inspection table.
#pragma once

#include <cstdio>

#include "converter/convert.h"

namespace iris {

// One line per tensor: name, from -> to, why, bytes, layout and padding; then the total.
void print_plan(const ConvertReport& r, std::FILE* out);
// Requantized tensors, worst SNR first (at most 10 lines; --report has them all).
void print_quality_summary(const ConvertReport& r, std::FILE* out);
// The JSON of inspect_path() as a table on stdout.
void print_inspection(const nlohmann::json& j);

}  // namespace iris
