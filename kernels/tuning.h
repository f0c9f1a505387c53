// The measured best kernel variant per format and batch, where a KernelVariants leaves the
// choice to the kernels (0). kernels/NOTES.md has the runs behind each number.
#pragma once

#include "kernels/launch_config.h"

namespace iris {

// Items (8 elements each) per thread per loop step of the tiled dequant kernel: 2, 4 or 8.
int dequant_unroll(const KernelVariants& variants, int view_format);

// Chunks each warp of the tensor-core GEMV loads before using any: 1 or 2.
int gemv_unroll(const KernelVariants& variants, int view_format, int batch);

}  // namespace iris
