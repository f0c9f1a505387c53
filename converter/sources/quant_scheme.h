// The quantization scheme a checkpoint declares, read before any tensor: config.json's
// quantization_config (quant_method, format, config_groups, load_in_8bit) and ModelOpt's
// hf_quant_config.json. A scheme iris does not decode is refused here, naming it, so that a
// checkpoint never converts as something it is not (another tool's codes taken for weights)
// and never fails on a tensor-level symptom that names the wrong cause.
#pragma once

#include <string>

#include "common/status.h"
#include "converter/sources/snapshot.h"

namespace iris {

// OK for checkpoints whose declared scheme iris reads (none, mxfp4, bitsandbytes 4-bit and 8-bit, fp8 /
// fbgemm_fp8, compressed-tensors float-quantized or dense, ModelOpt FP8); kUnsupported with
// one line naming the scheme otherwise; kInvalidInput for a declaration that is malformed.
Status check_quantization_scheme(const Snapshot& snap);

}  // namespace iris
