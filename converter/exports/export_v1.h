// `iris export ARCHIVE --format iris-v1`: the seed engine's .iris v1 archive (formats/iris_v1.h,
// FORMAT.md appendix A), as its convert_to_iris.py writes it, so any gpt-oss model iris reads
// can feed that engine: the seed's names (embed, L{l}.w_q, L{l}.gate_up_blocks, ...), BF16
// weights and biases, FP32 norms and sinks, the MXFP4 experts as the raw Hugging Face blocks
// and scales, in the seed's order, 256-byte aligned after a 4096-byte header.
#pragma once

#include "common/status.h"
#include "converter/exports/export.h"

namespace iris {

// kUnsupported naming the tensor for anything v1 cannot express: a tensor with no place
// among the seed's names, NF4 / FP8 / bitsandbytes FP4 tensors, experts not in MXFP4, more
// than 8 dims, dtypes the seed does not convert.
Result<ExportReport> run_export_v1(const ExportOptions& options);

}  // namespace iris
