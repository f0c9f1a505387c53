// Kernel variants that `iris bench --variant NAME=VALUE` can switch between, so that one
// GPU run can time several against each other (kernels/NOTES.md records which won). The
// defaults are the measured best; every variant computes the same result and is tested.
#pragma once

#include <string>

#include "common/status.h"

namespace iris {

// Items (8 elements each) per thread per loop step of the tiled dequant kernel: 2, 4 or 8;
// by default the measured best for the format (ViewFormat as int), unless a variant set one.
int dequant_unroll(int view_format);

// Which GEMV kernel runs where both could: "auto" (tensor cores where the layout allows),
// "cuda-cores" (the FP32 CUDA-core kernels everywhere).
bool gemv_tensor_cores_allowed();

// Chunks each warp of the tensor-core GEMV loads before using any: 1 or 2; by default the
// measured best for the format (ViewFormat as int) and batch, unless a variant set one.
int gemv_unroll(int view_format, int batch);

// Sets "dequant-unroll" (auto|2|4|8), "gemv" (auto|cuda-cores) or "gemv-unroll" (auto|1|2);
// unknown names or values are usage errors.
Status set_kernel_variant(const std::string& name, const std::string& value);

}  // namespace iris
