// What a kernel launch needs besides its operands: the device's SM count and the architecture
// of its loaded kernel code (queried once per device by whoever owns the launches, see
// device_info.h) and the kernel variants to run.
// Passed by the caller, never read from globals, so two engines in one process can differ.
#pragma once

#include <memory>

namespace iris {

class LaunchCache;  // kernels/launch_cache.h

// Variants that `iris bench --variant` compares in one GPU run (kernels/NOTES.md records which
// won). The defaults (0 / true) are the measured best; every variant computes the same result
// and the kernel tests run each (the two probes, below, are the exceptions).
struct KernelVariants {
  int dequant_unroll = 0;         // items per thread per step of the tiled dequant: 0 (per-format best), 1, 2, 4, 8
  int dequant_words = 0;          // code words of 8 elements per item of the tiled BF16 dequant: 0 (per-format best), 1, 2
  bool gemv_tensor_cores = true;  // false: the FP32 CUDA-core GEMV everywhere
  int gemv_unroll = 0;            // chunks per warp of the tensor-core GEMV: 0 (per-format best), 1, 2
  int gemv_prefetch = 0;          // tensor-core GEMV, the next chunk's codes in flight (U = 0): 0 (per-format best), 1 off, 2 on (wins over gemv_unroll)
  int gemv_warps = 0;             // warps per stripe of the tensor-core GEMV: 0 (the launch's rule: FP8 over few stripes 16, else all stripes in one wave with at most 8), 1..16
  int fp8_decode = 0;             // tensor-core GEMV FP8 decode: 0 (best for the arch), 1 hardware conversion, 2 bit arithmetic
  int nf4_table = 0;              // tensor-core GEMV NF4 lookup: 0 (best), 1 16-entry split table, 2 256-entry byte-pair table (the exact table; not with nf4_bf16_table)
  int nf4_chunk = 0;              // tensor-core GEMV NF4 with nf4_bf16_table and nf4_scaled off: 0 (best: 64 since run v55b), 1 64-column chunks, 2 128-column chunks where tile_k allows
  int nf4_lookup = 0;             // tensor-core GEMV NF4 with nf4_bf16_table and nf4_scaled: 0 (best), 1 a shared-memory pair table a lane, 2 byte permutes on the table in registers
  int nf4_scaled = 0;             // tensor-core GEMV NF4 with nf4_bf16_table: 0 (best), 1 the absmax applied to the FP32 partial sums, 2 to the BF16 weights (bitsandbytes' arithmetic)
  int programmatic = 0;           // tensor-core GEMVs as programmatic dependent launches: 0 (best), 1 off, 2 on, 3 on with the next kernel released late (where the code allows)
  int gemv_spread = 0;            // tensor-core GEMV launches of one wave with room to spare: 0 (best), 1 off, 2 on (at most ceil(blocks / SMs) blocks a SM)
  // Tensor-core GEMV blocks a SM at most: 0 (the launch's rule), 1..32 (unused shared memory
  // holds the launch to that many). Run v63 (H200): holding a launch of several waves to fewer
  // blocks so its last wave comes out fuller lost at every grouped shape (kernels/NOTES.md).
  int gemv_blocks = 0;
  int gemv_l2_prefetch = 0;       // tensor-core GEMV blocks ask L2 for their stripe's codes first (sm_90): 0 (best), 1 off, 2 on
  // A measurement aid, not a variant: the tensor-core GEMV (dense and expert) with its decode
  // left out, so its outputs are meaningless (kernels/NOTES.md, runs v33 and v37). Only
  // `iris bench` sets it.
  // 1: every format without its decode; for NF4's BF16-table kernel (MmaNf4Scaled) alone, 2:
  // without its absmax loads (absmax 1), 3: without its shared-memory table fill (run v58).
  // (4, MXFP4 decoded as if its words held bit planes, run v67, became MXFP4's decode in v68.)
  int gemv_probe = 0;
  // The same for the tiled dequant to BF16: its loads, item arithmetic and stores, the code
  // words stored undecoded (kernels/NOTES.md, run v35). Only `iris bench` sets it.
  bool dequant_probe = false;
};

struct LaunchConfig {
  int sm_count = 0;     // streaming multiprocessors of the device the stream belongs to (> 0)
  int kernel_arch = 0;  // the architecture of the loaded kernel code (DeviceInfo::kernel_arch)
  KernelVariants variants;
  // A declared precision, not a variant (its results differ): the tensor-core GEMV takes each
  // NF4 weight as bitsandbytes' own GEMV forms it, bf16(bf16(t) * bf16(absmax)) (three BF16
  // roundings, each within 2^-8), instead of each table value as two BF16s (within 2^-16) and
  // the exact FP32 absmax: one mma a fragment instead of two, one shared-memory lookup and one
  // BF16 multiply a code byte, MXFP4's chunk shape (verify/gemv_bound.h:
  // GemvAccumulation::kTensorCoresBf16Table).
  bool nf4_bf16_table = false;
  // The device's shared memory in bytes (DeviceInfo), for launches that size theirs: a SM's,
  // each block's reserved share, and the most one block may opt in to. 0: unknown (a launch
  // then asks for no more than it uses).
  int smem_per_sm = 0, smem_reserved_per_block = 0, smem_optin_per_block = 0;
  // The device's launch queries, answered once (DeviceInfo's; null: asked of the runtime at
  // every launch). Shared, so an expert set that keeps a LaunchConfig keeps it alive.
  std::shared_ptr<LaunchCache> cache = nullptr;
};

}  // namespace iris
