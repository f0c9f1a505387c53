#include "kernels/tuning.h"

#include <algorithm>

#include "kernels/arch.cuh"

namespace iris {

int dequant_unroll(const KernelVariants& variants, ViewFormat format, int words) {
  if (variants.dequant_unroll) return variants.dequant_unroll;
  // One-word items, runs v8 and v10 (14336x4096, H100, us at 2 / 4 / 8; docs/device-runs/*-v8/v10-variants.txt): MXFP4 58.0 / 59.7 / 59.8 and
  // 57.9 / 58.9 / 59.5; NF4 62.9 / 62.8 / 75.2 and 62.1 / 62.6 / 75.3; FP8 72.3 / 73.2 / 90.2
  // and 71.7 / 72.3 / 89.4 (8 items per thread cost occupancy).
  // Two-word items, run v37 (us at 1 / 2 / 4; docs/device-runs/2026-11-23-v37-sweep.txt): NF4 14336x4096 57.45 / 58.46 /
  // 59.61, 32x5760x2880 505.9 / 553.0 / 549.5; FP8 91.07 / 69.26 / 68.37 and 737.3 / 647.8 / 606.7.
  if (words == 2) return format == ViewFormat::kFp8 ? 4 : 1;
  return format == ViewFormat::kFp8 ? 4 : 2;
}

int dequant_words(const KernelVariants& variants, const QuantView& v) {
  // Run v37 (14336x4096, the 8-element default unroll against the best 16-element one): NF4
  // 63.06 -> 57.45 us and FP8 72.72 -> 68.37 (the kernels going from issue-bound to
  // memory-bound), MXFP4 57.68 -> 69.14, slower (memory-bound already; kernels/NOTES.md).
  const int want = variants.dequant_words ? variants.dequant_words : v.format == ViewFormat::kMxfp4 ? 1 : 2;
  // (tile_k is a multiple of 16 in every tiled view: make_quant_view requires 16-byte tile rows.)
  if (want != 2 || !v.tiled || v.k % 16 != 0) return 1;
  switch (v.format) {
    case ViewFormat::kMxfp4: return 2;  // tile_k and K multiples of 16 keep a run inside one 32-block
    case ViewFormat::kNf4: return v.block_size % 16 == 0 ? 2 : 1;  // and the flat index of a run is 16-aligned
    case ViewFormat::kFp8:  // tensor and channel scales; block and group scales whose width 16 divides
      return v.granularity < 2 || (v.granularity == 2 ? v.block_k % 16 == 0 : v.group_size % 16 == 0) ? 2 : 1;
    case ViewFormat::kIntGroup: return 1;  // (its own kernel: kernels/int_group.cu)
    case ViewFormat::kNvfp4: return 2;     // tile_k and K multiples of 16 keep a run inside one 16-block
  }
  return 1;
}

namespace {

// The step mode from the variants where they force one, else from the measured defaults:
// forced prefetch, then a forced unroll, then (prefetch forced off) the default unroll.
int step_from(const KernelVariants& variants, bool default_prefetch, int default_unroll) {
  if (variants.gemv_prefetch == 2) return 0;
  if (variants.gemv_unroll) return variants.gemv_unroll;
  if (variants.gemv_prefetch == 1) return default_unroll;
  return default_prefetch ? 0 : default_unroll;
}

}  // namespace

int gemv_step(const LaunchConfig& c, ViewFormat format, int batch, uint64_t stripes) {
  // Unroll, run v10 (14336x4096, H100, us at unroll 1 / 2; docs/device-runs/2026-11-22-v10-variants.txt): batch 1: MXFP4 22.7 /
  // 22.9, NF4 34.5 / 42.5, FP8 38.9 / 36.1; batch 16: MXFP4 29.7 / 40.1, NF4 46.1 / 48.7, FP8 39.5 / 49.1.
  const int unroll = format == ViewFormat::kFp8 && batch <= 8 ? 2 : 1;
  // The prefetch, run v45 (H100, batch 1 / 16, us without / with; docs/device-runs/2026-11-26-v45-shapes-*):
  // it wins where a launch has few stripes (at most two a SM: each block gets up to 8 warps,
  // and each warp's serial chain of chunks is what the time is) -- MXFP4 4096x14336 21.98 ->
  // 19.94, 4096x4096 8.73 -> 8.03, 1024x4096 6.29 -> 5.55; FP8 40.82 -> 34.80, 13.52 -> 12.14,
  // 12.33 -> 10.59 -- and loses where the stripes fill the card, where its registers cost
  // warps (FP8 14336x4096 b=16 40.59 -> 46.21; NF4 14336x4096 34.77 -> 40.79). NF4 gains at no
  // shape. MXFP4 at batch 9..16 gains at every shape (14336x4096 30.32 -> 27.62).
  // FP8 at batch 1..8 since run v51: with its scales found once a stripe its prefetch kernel
  // fell from 96 to 63 registers (4 blocks a SM instead of 2), and the prefetch won where the
  // stripes fill the card too (14336x4096, H100, unroll 2 / prefetch: block scales 31.9 / 26.2
  // us, channel 29.9 / 25.7; docs/device-runs/2026-11-27-v51-*).
  // (Run v52: MXFP4's prefetch also beats unroll 1 at 14336x4096, 18.0 us against 19.5 before
  // the word-by-word decode and 18.6-19.0 after it, but is not taken there: the rule must not
  // differ between batch 1 and 8, the expert launch takes its warp count from batch 8's
  // kernel, and for a 14336-row expert that count would fall from 4 warps to 2, unmeasured.)
  // NF4 with its declared BF16 table (one mma a fragment), run v54 (H200, batch 1, us at
  // unroll 1 / prefetch): 4096x14336 32.6 / 29.1, 4096x4096 11.0 / 9.7, 1024x4096 10.0 / 8.2:
  // the few-stripes rule, as the other formats'.
  // NF4's BF16 table with the absmax on the weights (MXFP4's chunk shape) takes MXFP4's rule:
  // run v57 (H100, batch 16, us, prefetch / unroll 1) 14336x4096 38.9 / 39.5, 4096x14336
  // 32.3 / 41.2, 4096x4096 12.1 / 15.7.
  // NVFP4 (its scales found once a stripe, as FP8's): the prefetch at every shape, run of
  // 2026-11-30 (H200, batch 1, us, the few-stripes rule / prefetch): 14336x4096 17.18 / 15.84,
  // 6144x4096 10.85 / 8.68, 4096x14336 20.76 / 20.73, 4096x4096 7.09 / 7.07.
  const bool scaled_nf4 = format == ViewFormat::kNf4 && c.nf4_bf16_table && nf4_scaled_weights(c);
  const bool prefetch = format == ViewFormat::kNvfp4                                      ? true
                        : (format == ViewFormat::kMxfp4 || scaled_nf4) && batch > 8 ? true
                        : format == ViewFormat::kNf4 && !c.nf4_bf16_table ? false
                        : format == ViewFormat::kFp8 && batch <= 8 ? true
                                                                   : stripes <= 2 * uint64_t(c.sm_count > 0 ? c.sm_count : 1);
  return step_from(c.variants, prefetch, unroll);
}

int gemv_experts_step(const KernelVariants& variants) {
  // The prefetch, runs v45 and v45d (us, top-4 of 32 experts): unbounded, its registers rose
  // from 80 to 103-110 and it lost everywhere (H100: MXFP4 32x5760x2880 25.17 -> 30.40, FP8
  // 40.80 -> 59.47); held to 80 registers (__launch_bounds__ of 3 blocks, gemv_mma.cu) it wins
  // for MXFP4 (H200, the same session, off / on twice: 24.86 / 24.53 and 24.96 / 24.59) and
  // still loses for FP8 (v45c: 41.90 against v45b's 40.62) and NF4 (40.05 against 38.94).
  // Unroll 1 otherwise, run v39: FP8 32x5760x2880 41.5 / 52.3 and 41.1 / 62.2 us at unroll
  // 1 / 2, 32x2880x2880 24.4 / 28.3 and 33.9 / 48.5; MXFP4 and NF4 within 0.5 us except MXFP4
  // 32x2880x2880 (33.6 / 27.8 in one run, 15.2 / 18.3 in the other).
  // Run v52: with MXFP4 decoded word by word at unroll 1 (63 registers: 4 blocks a SM), unroll
  // 1 beats the prefetch for MXFP4 too (H100, us: 32x5760x2880 21.8 against 24.0, 32x2880x2880
  // 13.0 against 13.8).
  return step_from(variants, false, 1);
}

int gemv_wide_warps(const LaunchConfig& c, ViewFormat format, int batch, uint64_t stripes) {
  // Run v62 (H100, batch 1, us, 8 warps with the prefetch / 16 at unroll 1): FP8 with block
  // scales 4096x14336 (256 stripes) 31.0 / 26.2, 4096x4096 10.3 / 9.7, where 14336x4096 (896)
  // loses, 26.2 / 34.4, and MXFP4 and NF4 lose at every shape (4096x14336 17.2 / 17.4 and
  // 18.9 / 20.0): FP8's decode is the longest a chunk, and a launch of at most two blocks a SM
  // at 8 warps leaves each warp a long serial chain of chunks that 16 warps halve. Measured at
  // batch 1 only, so taken at batches up to 8 (the kernels of batch 1..8 are one).
  // Run v68b (H200, batch 1, us, this rule / the same rule for MXFP4 too, with v68's bit-plane
  // codes): MXFP4 4096x14336 15.63 / 15.15 gains, but 4096x4096 5.95 / 6.55, 1024x4096 4.0 / 4.2
  // and gpt-oss's down experts (top-4 of 32x2880x2880) 11.8 / 14.6 lose, and Llama-3-8B with it
  // went 2.353 / 2.348 -> 2.457 / 2.452 ms/token. Nor where each of 16 warps keeps at least 4
  // chunks (MXFP4 with K >= 8192, run v68c): 4096x14336 15.5 / 15.1, but the grouped launch of
  // Mixtral's w2 shape (top-4 of 8x4096x14336), which must take the dense launch's warps, 47.5 /
  // 51.5; Llama-3-8B 2.337 / 2.332 ms/token, inside the noise. Not taken either.
  const uint64_t sms = uint64_t(c.sm_count > 0 ? c.sm_count : 1);
  return format == ViewFormat::kFp8 && batch <= 8 && stripes <= 2 * sms ? 16 : 0;
}

bool fp8_bit_decode(const LaunchConfig& c) {
  if (c.variants.fp8_decode) return c.variants.fp8_decode == 2;
  // Before sm_89 there is no E4M3 conversion instruction (kernels/arch.cuh). From sm_89 the
  // conversions win: run v31c measured the bit decode 15% slower on the H100 (kernels/NOTES.md).
  return c.kernel_arch < 89;
}

bool nf4_pair_table(const LaunchConfig& c) { return c.variants.nf4_table == 2; }

bool nf4_scaled_weights(const LaunchConfig& c) {
  // Run v57 (H100, batch 1, us, the absmax on the BF16 weights / on the partial sums in 64-column
  // chunks / in 128): 14336x4096 22.49 / 28.36 / 29.43, 4096x14336 21.13 / 30.61 / 25.24,
  // 4096x4096 7.89 / 10.09 / 9.07, 1024x4096 5.49 / 8.26 / 6.71; experts top-4 of 32
  // 32x5760x2880 28.11 / 32.99 / 32.96, 32x2880x2880 16.64 / 19.46 / 18.98. Batch 16 loses at
  // 14336x4096 (38.9-39.7 against 34.3) and gains at 4096x14336 (32.0-32.3 against 39.0).
  // Whole models: Llama-3-8B NF4 4.149 -> 3.476 ms/token, Mixtral-8x7B NF4 6.205 -> 5.229.
  // It is also the declared arithmetic (bitsandbytes'); the other is kept as a variant, within
  // the declared bound (it is the more exact).
  return c.variants.nf4_scaled != 1;
}

bool nf4_register_lookup(const LaunchConfig& c, bool table_binds) {
  if (c.variants.nf4_lookup) return c.variants.nf4_lookup == 2;
  // Run v62 (H100, batch 1, us; the warps of the register kernel's occupancy, which is what both
  // kernels now run): at the same warps and blocks a SM the shared-memory table wins, its
  // lookup a load where the permutes take 9 more instructions a word (25 against 16, counted in
  // the source) -- 4096x14336 at 8
  // warps 18.9 / 22.8, two of them grouped 36.9 / 40.5, top-4 of 32x5760x2880 25.5 / 26.6 --
  // and where its 32 KB a block holds the launch to fewer blocks a SM, the register lookup
  // wins: 14336x4096 at 4 warps (6 blocks a SM against 8) 28.2 / 24.0, Llama's grouped gate/up
  // (2 x 14336x4096) 45.8 / 39.3, 4 x 14336x4096 78.5 / 71.2.
  return table_binds;
}

bool nf4_wide_chunks(const LaunchConfig& c) {
  // Runs v55 and v55b (H200, the BF16 table, us at 64 / 128 columns a chunk): where a launch has
  // few stripes (at most two a SM, where it also takes the prefetch) the wide chunk wins --
  // batch 1: 4096x14336 30.6 / 25.1, 4096x4096 10.0 / 8.9, 1024x4096 8.5 / 6.7; batch 16:
  // 4096x14336 39.3 / 29.1, 4096x4096 13.9 / 11.4 -- and where the stripes fill the card it
  // ties at batch 1 (14336x4096 28.1 / 28.1) and loses at batch 16 (34.1 / 40.5). Taken by that
  // rule, Llama-3-8B NF4 went 3.972 -> 3.801 ms/token but Mixtral-8x7B NF4 6.033 -> 6.225: the
  // grouped expert launch on its 4096x14336 w2 (unroll 1: 80 registers against 64, ptxas -v) loses
  // what the dense launch on the same shape gains, and the two must take the same chunk (an
  // expert's row equals the dense GEMV of its matrix bit for bit). So it is not the default
  // until the expert launch gains from it too; the variant asks for it (where tile_k allows).
  // (A rule by stripes would have to see one matrix's stripes in both launches.)
  return c.variants.nf4_chunk == 2;
}

bool programmatic_launch(const KernelVariants& variants, int kernel_arch) {
  // Code for an architecture before sm_90 has no griddepcontrol.wait: never (launch.h).
  // Run v46 (H100; docs/device-runs/2026-11-27-v46-*): a chain of GEMVs gains 1-1.2 us a launch
  // (MXFP4 4096x4096 8.14 -> 6.98 us, 4096x14336 19.95 -> 18.78), filled launches little, NF4
  // 14336x4096 loses 1.7; whole models 3-8% (Llama-3-8B MXFP4 3.220 -> 3.049 ms/token,
  // gpt-oss-20b 2.516 -> 2.343) with Inductor's kernels programmatic too.
  if (kernel_arch < kProgrammaticLaunchMinArch) return false;
  return variants.programmatic != 1;
}

bool gemv_spread(const KernelVariants& variants) {
  // Run v60 (H200, batch 1, us, spread / not): a launch of few stripes (Llama's 4096-row
  // projections: 256 stripes on 132 SMs) whose kernel could hold 3-4 blocks a SM leaves it to
  // the block scheduler how many each SM gets. MXFP4's prefetch kernel at 4096x14336 went from
  // 16.1 to 19.7 when its registers fell from 115 (2 blocks a SM) to 80 (3); held to 2 again
  // it takes 16.1 (4096x4096 6.1 / 7.0, FP8 4096x14336 28.4 / 28.8).
  return variants.gemv_spread != 1;
}

uint32_t l2_prefetch_bytes(const KernelVariants& variants, int kernel_arch, uint64_t per_block, uint64_t blocks) {
  // Run v46 (H100, batch 1): asked of L2 as each block starts, the codes cost more than they
  // saved at 17 of 18 decode shapes (MXFP4 4096x14336 23.78 -> 25.88 us, 4096x4096 8.23 ->
  // 8.36): the bulk requests queue ahead of the warps' own loads. Kept as a variant.
  if (kernel_arch < kProgrammaticLaunchMinArch || variants.gemv_l2_prefetch != 2) return 0;
  // 16 MB: a third of the smallest L2 of the sm_90 parts (H100 PCIe 50 MB), and more than
  // the ~2 us a GEMV's wait for its producer lasts can bring from DRAM at 3-5 TB/s.
  constexpr uint64_t kBudget = uint64_t(16) << 20;
  const uint64_t share = blocks ? kBudget / blocks : 0;
  return uint32_t(std::min(per_block, share) & ~uint64_t(15));
}

}  // namespace iris
