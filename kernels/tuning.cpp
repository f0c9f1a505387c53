#include "kernels/tuning.h"

namespace iris {

int dequant_unroll(const KernelVariants& variants, int view_format) {
  if (variants.dequant_unroll) return variants.dequant_unroll;
  // Runs v8 and v10 (14336x4096, H100, us at 2 / 4 / 8; docs/device-runs/*-v8/v10-variants.txt): MXFP4 58.0 / 59.7 / 59.8 and
  // 57.9 / 58.9 / 59.5; NF4 62.9 / 62.8 / 75.2 and 62.1 / 62.6 / 75.3; FP8 72.3 / 73.2 / 90.2
  // and 71.7 / 72.3 / 89.4 (8 items per thread cost occupancy).
  return view_format == 3 ? 4 : 2;
}

int gemv_unroll(const KernelVariants& variants, int view_format, int batch) {
  if (variants.gemv_unroll) return variants.gemv_unroll;
  // Run v10 (14336x4096, H100, us at unroll 1 / 2; docs/device-runs/2026-11-22-v10-variants.txt): batch 1: MXFP4 22.7 / 22.9, NF4 34.5 /
  // 42.5, FP8 38.9 / 36.1; batch 16: MXFP4 29.7 / 40.1, NF4 46.1 / 48.7, FP8 39.5 / 49.1.
  return view_format == 3 && batch <= 8 ? 2 : 1;
}

bool fp8_bit_decode(const LaunchConfig& c) {
  if (c.variants.fp8_decode) return c.variants.fp8_decode == 2;
  // Before sm_89 there is no E4M3 conversion instruction (kernels/arch.cuh). From sm_89 the
  // conversions win: run v31c measured the bit decode 15% slower on the H100 (kernels/NOTES.md).
  return c.kernel_arch < 89;
}

bool nf4_pair_table(const LaunchConfig& c) { return c.variants.nf4_table == 2; }

}  // namespace iris
