// The measured best kernel variant per format and batch, where a KernelVariants leaves the
// choice to the kernels (0). kernels/NOTES.md has the runs behind each number.
#pragma once

#include <cstdint>

#include "kernels/launch_config.h"
#include "kernels/quant_view.h"

namespace iris {

// Items per thread per loop step of the tiled dequant kernel (1, 2, 4 or 8), for items of
// `words` code words (8 elements each).
int dequant_unroll(const KernelVariants& variants, ViewFormat format, int words);

// Code words (8 elements each) per item of the tiled BF16 dequant: 2 where the variant or the
// format's default asks for it and the tensor allows it (one scale input covers every aligned
// run of 16 elements, K a multiple of 16), else 1.
int dequant_words(const KernelVariants& variants, const QuantView& view);

// The tensor-core GEMV's step mode (stripe_mma's U), for a launch of `stripes` 16-row stripes
// on `sm_count` SMs: 0 the rolling prefetch (each warp keeps its next chunk's codes and scales
// in flight while it decodes the current one), else the chunks each warp loads before using
// any (1 or 2).
int gemv_step(const KernelVariants& variants, ViewFormat format, int batch, uint64_t stripes, int sm_count);

// The same for the grouped expert GEMV's launch (its warp count stays the dense launch's).
int gemv_experts_step(const KernelVariants& variants, ViewFormat format);

// The tensor-core GEMV's FP8 decode: bit arithmetic (true) or the E4M3 conversion instruction.
bool fp8_bit_decode(const LaunchConfig& config);

// The tensor-core GEMV's NF4 lookup: the 256-entry byte-pair table (true) or the 16-entry one.
bool nf4_pair_table(const LaunchConfig& config);

}  // namespace iris
