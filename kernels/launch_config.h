// What a kernel launch needs besides its operands: the device's SM count and the architecture
// of its loaded kernel code (queried once per device by whoever owns the launches, see
// device_info.h) and the kernel variants to run.
// Passed by the caller, never read from globals, so two engines in one process can differ.
#pragma once

namespace iris {

// Variants that `iris bench --variant` compares in one GPU run (kernels/NOTES.md records which
// won). The defaults (0 / true) are the measured best; every variant computes the same result
// and the kernel tests run each (the two probes, below, are the exceptions).
struct KernelVariants {
  int dequant_unroll = 0;         // items per thread per step of the tiled dequant: 0 (per-format best), 1, 2, 4, 8
  int dequant_words = 0;          // code words of 8 elements per item of the tiled BF16 dequant: 0 (per-format best), 1, 2
  bool gemv_tensor_cores = true;  // false: the FP32 CUDA-core GEMV everywhere
  int gemv_unroll = 0;            // chunks per warp of the tensor-core GEMV: 0 (per-format best), 1, 2
  int gemv_prefetch = 0;          // tensor-core GEMV, the next chunk's codes in flight (U = 0): 0 (per-format best), 1 off, 2 on (wins over gemv_unroll)
  int gemv_warps = 0;             // warps per stripe of the tensor-core GEMV: 0 (all stripes in one wave), 1..8
  int fp8_decode = 0;             // tensor-core GEMV FP8 decode: 0 (best for the arch), 1 hardware conversion, 2 bit arithmetic
  int nf4_table = 0;              // tensor-core GEMV NF4 lookup: 0 (best), 1 16-entry split table, 2 256-entry byte-pair table (the exact table; not with nf4_bf16_table)
  int nf4_chunk = 0;              // tensor-core GEMV NF4 with nf4_bf16_table: 0 (best: 64 since run v55b), 1 64-column chunks, 2 128-column chunks where tile_k allows
  int programmatic = 0;           // tensor-core GEMVs as programmatic dependent launches: 0 (best), 1 off, 2 on, 3 on with the next kernel released late (where the code allows)
  int gemv_l2_prefetch = 0;       // tensor-core GEMV blocks ask L2 for their stripe's codes first (sm_90): 0 (best), 1 off, 2 on
  // A measurement aid, not a variant: the tensor-core GEMV (dense and expert) with its decode
  // left out, so its outputs are meaningless (kernels/NOTES.md, runs v33 and v37). Only
  // `iris bench` sets it.
  bool gemv_probe = false;
  // The same for the tiled dequant to BF16: its loads, item arithmetic and stores, the code
  // words stored undecoded (kernels/NOTES.md, run v35). Only `iris bench` sets it.
  bool dequant_probe = false;
};

struct LaunchConfig {
  int sm_count = 0;     // streaming multiprocessors of the device the stream belongs to (> 0)
  int kernel_arch = 0;  // the architecture of the loaded kernel code (DeviceInfo::kernel_arch)
  KernelVariants variants;
  // A declared precision, not a variant (its results differ): the tensor-core GEMV takes each
  // of NF4's 16 table values rounded to one BF16 (within 2^-9 of it, as bitsandbytes' kernels
  // round it) instead of as two (within 2^-18): one mma a fragment instead of two and one
  // shared-memory lookup a code byte (verify/gemv_bound.h: GemvAccumulation::kTensorCoresBf16Table).
  bool nf4_bf16_table = false;
};

}  // namespace iris
