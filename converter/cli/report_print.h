// Human-readable renderings: the --dry-run plan, the quality summary, the inspection table.
#pragma once

#include <cstdio>

#include "converter/pipeline/convert.h"
#include "converter/inspect/inspect.h"

namespace iris {

// One line per tensor: name, from -> to, why, bytes, layout and padding; then the total.
void print_plan(const ConvertReport& r, std::FILE* out);
// Requantized tensors, worst SNR first (at most 10 lines; --report has them all).
void print_quality_summary(const ConvertReport& r, std::FILE* out);
// An inspection as a table on stdout.
void print_inspection(const Inspection& in);
// An inspection as `--json` prints it: the text of dump_json(in.to_json() + "ok": true, 2),
// written one tensor at a time so that 10^6 tensors never form one document or one string.
void print_inspection_json(const Inspection& in, std::FILE* out);

}  // namespace iris
