// The properties of one CUDA device that the kernels and their callers need, queried once.
// Owners of launches (a device archive, verify, the benchmark) keep the DeviceInfo of their
// device and build LaunchConfigs from it: no query per launch, no process-wide cache.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "kernels/launch_config.h"

namespace iris {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  uint64_t l2_bytes = 0;
  uint64_t total_memory = 0;

  LaunchConfig launch_config(const KernelVariants& variants = {}) const { return {sm_count, variants}; }
};

// kNoDevice, with the reason, when `ordinal` is not a usable device: no driver, no such
// ordinal, or a compute capability below 9.0 (the kernels are built for sm_90a and
// compute_90 PTX).
Result<DeviceInfo> query_device(int ordinal);

}  // namespace iris
