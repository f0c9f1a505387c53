// The picked experts of a set copied into one contiguous stack: what dequantizing only the
// experts a router chose needs (ExpertSet::dequantize), with the ids on the device so that
// nothing synchronizes.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/kernels.h"

namespace iris {

// workspace <- pairs matrices, pair p a copy of experts[ids[p]]'s codes at p * code bytes and
// its scales at pairs * code bytes + p * scale bytes (matrix_code_bytes and
// mxfp4_matrix_scale_bytes of `geometry`, a set's view with rows = N): an MXFP4 [pairs, N, K] stack in the
// experts' own tile layout and code order. An id outside [0, count) gives that pair zero codes
// and NaN scales (E8M0 0xFF), so its matrix dequantizes to NaN. `workspace` 16-byte aligned;
// at most 65535 pairs (one grid dimension).
Status cuda_gather_mxfp4_experts(const ExpertMatrix* experts, uint32_t count, const QuantView& geometry, const int32_t* ids,
                                 uint64_t pairs, uint8_t* workspace, void* stream);

}  // namespace iris
