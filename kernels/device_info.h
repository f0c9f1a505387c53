// The properties of one CUDA device that the kernels and their callers need, queried once.
// Owners of launches (a device archive, verify, the benchmark) keep the DeviceInfo of their
// device and build LaunchConfigs from it: no query per launch, no process-wide cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "kernels/launch_config.h"

namespace iris {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  // The architecture the loaded kernel code was compiled for, as major * 10 + minor (the
  // driver's ptxVersion): 90 for the sm_90a machine code on an H100, 80 when an H100 runs a
  // build that carries only compute_75 and compute_80 PTX. It, not the device's compute
  // capability, says which instructions the kernels have (kernels/arch.cuh).
  int kernel_arch = 0;
  uint64_t l2_bytes = 0;
  uint64_t total_memory = 0;
  int smem_per_sm = 0, smem_reserved_per_block = 0, smem_optin_per_block = 0;  // bytes (LaunchConfig)
  // The launch queries' answers for this device (kernels/launch_cache.h), shared by the
  // copies of this DeviceInfo and the LaunchConfigs made from it. Set by query_device.
  std::shared_ptr<LaunchCache> launch_cache;

  LaunchConfig launch_config(const KernelVariants& variants = {}, bool nf4_bf16_table = false) const {
    return {sm_count, kernel_arch, variants, nf4_bf16_table, smem_per_sm, smem_reserved_per_block, smem_optin_per_block, launch_cache};
  }
};

// The oldest GPUs the kernels support: Turing (compute capability 7.5).
constexpr int kMinComputeCapability = 75;

// kNoDevice, with the reason, when `ordinal` is not a usable device: no driver, no such
// ordinal, a compute capability below 7.5, or a build whose targets (IRIS_CUDA_GENCODE) the
// device cannot load.
Result<DeviceInfo> query_device(int ordinal);

}  // namespace iris
