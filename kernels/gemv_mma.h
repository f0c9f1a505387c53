// The tensor-core GEMV (gemv_mma.cu): which layouts it takes, and its launcher.
#pragma once

#include "common/status.h"
#include "kernels/launch_config.h"
#include "kernels/quant_view.h"

namespace iris {

// True when the tensor-core kernel handles this tensor and batch: tiled with tile_n = 16 and
// tile_k a multiple of 64, batch 1..16, and scales constant over 64 columns where they are
// applied after the mma (NF4 blocks, FP8 blocks and groups).
bool gemv_mma_supports(const QuantView& v, int batch);

Status cuda_gemv_mma(const QuantView& v, const uint16_t* x, int batch, void* y, bool y_f32, void* stream, const LaunchConfig& config);

struct ExpertGemvArgs;

// The grouped expert GEMV on the tensor cores: `geometry` is any expert's view (all must be
// gemv_mma_supports at batch 1); each output equals cuda_gemv_mma's on that expert's matrix
// alone at batch 1, bit for bit.
Status cuda_gemv_experts_mma(const QuantView& geometry, const ExpertGemvArgs& args, bool y_f32, void* stream, const LaunchConfig& config);

// Whether cuda_gemv_experts_mma with ExpertGemvArgs::gated computes the activation in the
// GEMV's own store (one launch), rather than as the plain launch and the activation's own
// launch (where the store would cost the launch blocks a SM): a caller
// that can launch the activation itself does better then. False where the tensor-core kernel
// does not take the geometry. Asks the runtime about occupancy on the current device.
Status cuda_experts_gated_in_launch(const QuantView& geometry, const LaunchConfig& config, bool* in_launch);

}  // namespace iris
