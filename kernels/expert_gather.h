// The picked experts of a set copied into one contiguous stack: what dequantizing only the
// experts a router chose needs (ExpertSet::dequantize), with the ids on the device so that
// nothing synchronizes.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/kernels.h"

namespace iris {

// The bytes of one MXFP4 expert matrix of `geometry` (a set's, rows = N): its tiled codes, and
// its E8M0 scales (N rows of ceil(K / 32)), which follow the codes of all pairs in a workspace.
uint64_t mxfp4_matrix_code_bytes(const QuantView& geometry);
uint64_t mxfp4_matrix_scale_bytes(const QuantView& geometry);

// workspace <- pairs matrices, pair p a copy of experts[ids[p]]'s codes at p * code bytes and
// its scales at pairs * code bytes + p * scale bytes: an MXFP4 [pairs, N, K] stack in the
// experts' own tile layout and code order. An id outside [0, count) gives that pair zero codes
// and NaN scales (E8M0 0xFF), so its matrix dequantizes to NaN. `workspace` 16-byte aligned.
Status cuda_gather_mxfp4_experts(const ExpertMatrix* experts, uint32_t count, const QuantView& geometry, const int32_t* ids,
                                 uint64_t pairs, uint8_t* workspace, void* stream);

}  // namespace iris
