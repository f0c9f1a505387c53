// What a kernel launch needs besides its operands: the device's SM count (queried once per
// device by whoever owns the launches, see device_info.h) and the kernel variants to run.
// Passed by the caller, never read from globals, so two engines in one process can differ.
#pragma once

namespace iris {

// Variants that `iris bench --variant` compares in one GPU run (kernels/NOTES.md records which
// won). The defaults (0 / true) are the measured best; every variant computes the same result
// and the kernel tests run each.
struct KernelVariants {
  int dequant_unroll = 0;         // items per thread per step of the tiled dequant: 0 (per-format best), 2, 4, 8
  bool gemv_tensor_cores = true;  // false: the FP32 CUDA-core GEMV everywhere
  int gemv_unroll = 0;            // chunks per warp of the tensor-core GEMV: 0 (per-format best), 1, 2
};

struct LaunchConfig {
  int sm_count = 0;  // streaming multiprocessors of the device the stream belongs to (> 0)
  KernelVariants variants;
};

}  // namespace iris
