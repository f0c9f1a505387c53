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

}  // namespace iris
