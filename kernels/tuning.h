// Kernel variants that `iris bench --variant NAME=VALUE` can switch between, so that one
// GPU run can time several against each other (kernels/NOTES.md records which won). The
// defaults are the measured best; every variant computes the same result and is tested.
#pragma once

#include <string>

#include "common/status.h"

namespace iris {

// Items (8 elements each) per thread per loop step of the tiled dequant kernel: 2, 4 or 8.
int dequant_unroll();

// Which GEMV kernel runs where both could: "auto" (tensor cores where the layout allows),
// "cuda-cores" (the FP32 CUDA-core kernels everywhere).
bool gemv_tensor_cores_allowed();

// Chunks of 64 columns each warp of the tensor-core GEMV loads ahead: 1, 2 or 4.
int gemv_unroll();

// Sets "dequant-unroll", "gemv" or "gemv-unroll"; unknown names or values are usage errors.
Status set_kernel_variant(const std::string& name, const std::string& value);

}  // namespace iris
