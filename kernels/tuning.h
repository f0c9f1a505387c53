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
// under c (its variants, its SM count, NF4's table): 0 the rolling prefetch (each warp keeps its next chunk's codes and scales
// in flight while it decodes the current one), else the chunks each warp loads before using
// any (1 or 2).
int gemv_step(const LaunchConfig& c, ViewFormat format, int batch, uint64_t stripes);

// The same for the grouped expert GEMV's launch (its warp count stays the dense launch's): one
// rule for every format since run v52.
int gemv_experts_step(const KernelVariants& variants);

// Warps a stripe for a tensor-core GEMV launch of `stripes` stripes at batches up to `batch`,
// where a format's measurements call for more than the occupancy rule's 8 (kernels/gemv_mma.cu,
// warps_per_stripe); 0 leaves the rule to choose. A function of the matrix's geometry, so the
// grouped expert launch and the dense launch on one expert keep one order of sums.
int gemv_wide_warps(const LaunchConfig& c, ViewFormat format, int batch, uint64_t stripes);

// The tensor-core GEMV's FP8 decode: bit arithmetic (true) or the E4M3 conversion instruction.
bool fp8_bit_decode(const LaunchConfig& config);

// Whether a kernel that waits for its producer (kernels/grid_dependency.cuh) is launched as a
// programmatic dependent of the kernel before it: never where the loaded code predates sm_90
// (`kernel_arch`: it has no wait), else as the variant says or the measured default.
bool programmatic_launch(const KernelVariants& variants, int kernel_arch);

// The bytes of its stripe's codes each block of a tensor-core GEMV launch of `blocks` blocks
// asks L2 for with one bulk prefetch when it starts (dense: before it waits for its producer;
// experts: once the router's pick is known), at most `per_block` and a multiple of 16; 0 for
// none. A budget over the whole launch keeps the prefetched bytes well inside L2 however large
// the matrix.
uint32_t l2_prefetch_bytes(const KernelVariants& variants, int kernel_arch, uint64_t per_block, uint64_t blocks);

// Whether a tensor-core GEMV launch of at most two blocks a SM whose kernel could hold more
// holds each SM to ceil(blocks / SMs) resident blocks (by asking for dynamic shared memory it
// does not use), so that its blocks spread evenly over the SMs (run v60).
bool gemv_spread(const KernelVariants& variants);

// The tensor-core GEMV's NF4 lookup: the 256-entry byte-pair table (true) or the 16-entry one.
bool nf4_pair_table(const LaunchConfig& config);

// NF4 with the declared BF16 table: the absmax applied to the BF16 weights before the mma, as
// bitsandbytes' kernel does (true), or to each chunk's FP32 partial sums (false).
bool nf4_scaled_weights(const LaunchConfig& config);
// NF4's BF16-table kernel with the absmax on the weights: the table in registers, looked up by
// byte permutes (MmaNf4Permute), instead of a shared-memory copy a lane.
// `table_binds`: the shared-memory table would hold the launch to fewer blocks a SM than the
// register lookup's kernel gets at the same warps.
bool nf4_register_lookup(const LaunchConfig& config, bool table_binds);

// NF4 with the declared BF16 table and nf4_scaled_weights false: 128-column chunks (two absmax runs a lane) where the
// variant asks (tuning.cpp says why it is not the default), else 64-column ones.
bool nf4_wide_chunks(const LaunchConfig& config);

}  // namespace iris
