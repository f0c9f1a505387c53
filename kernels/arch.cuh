// What the code being compiled may use, by the architecture nvcc compiles it for (__CUDA_ARCH__,
// one pass per -gencode target; the host pass sees every feature so that it parses every
// body). Each instruction family that not every supported GPU has is named here once, and
// its users keep an exact fallback for the GPUs without it:
//   sm_75  Turing: no BF16 arithmetic, no BF16 mma, no cvt.bf16x2, no E4M3 conversion
//   sm_80  Ampere: BF16 mma (mma.m16n8k16 bf16), cvt.rn.bf16x2.f32, fma.rn.bf16x2
//   sm_89  Ada: cvt.rn.f16x2.e4m3x2
//   sm_90  Hopper: mul.rn.bf16x2, griddepcontrol (programmatic dependent launch),
//          cp.async.bulk.prefetch.L2
// Kernels that cannot run at all without a feature (the tensor-core GEMV) are never launched
// where the loaded code lacks it: the host reads the loaded code's architecture from the
// driver (DeviceInfo::kernel_arch) and picks another path.
#pragma once

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define IRIS_ARCH_BF16_MMA 1
#define IRIS_ARCH_BF16_CVT 1
#define IRIS_ARCH_BF16_FMA 1
#else
#define IRIS_ARCH_BF16_MMA 0
#define IRIS_ARCH_BF16_CVT 0
#define IRIS_ARCH_BF16_FMA 0
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define IRIS_ARCH_E4M3_CVT 1
#else
#define IRIS_ARCH_E4M3_CVT 0
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define IRIS_ARCH_BF16_MUL 1
#define IRIS_ARCH_GRID_DEPENDENCY 1
#else
#define IRIS_ARCH_BF16_MUL 0
#define IRIS_ARCH_GRID_DEPENDENCY 0
#endif

namespace iris {

// The lowest kernel architecture (DeviceInfo::kernel_arch, e.g. 80 for code compiled for
// compute_80) on which the tensor-core GEMV runs.
constexpr int kTensorCoreGemvMinArch = 80;

// The lowest kernel architecture whose code waits for its producer grid (griddepcontrol), so
// that it may be launched as a programmatic dependent (kernels/grid_dependency.cuh).
constexpr int kProgrammaticLaunchMinArch = 90;

}  // namespace iris
