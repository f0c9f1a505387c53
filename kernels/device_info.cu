#include "kernels/device_info.h"

#include <cuda_runtime.h>

#include "kernels/arch.cuh"
#include "kernels/device_guard.h"
#include "kernels/launch_cache.h"

namespace iris {

namespace {

// Never launched: the driver's attributes of this kernel tell which of the build's targets it
// loaded for the device (all kernels of the library are built for the same targets).
__global__ void arch_probe_kernel() {}

}  // namespace

Result<DeviceInfo> query_device(int ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    // Without an NVIDIA driver the runtime reports "driver version is insufficient", which
    // misleads on a machine that simply has no NVIDIA GPU: say that instead.
    int driver = 0;
    cudaDriverGetVersion(&driver);  // 0: no driver installed at all
    std::string why = e == cudaSuccess || e == cudaErrorNoDevice ? "this machine has no NVIDIA GPU"
                      : e == cudaErrorInsufficientDriver && driver == 0
                          ? "this machine has no NVIDIA GPU driver (so no usable NVIDIA GPU)"
                      : e == cudaErrorInsufficientDriver
                          ? "the NVIDIA driver (CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) +
                                ") is older than this build of iris needs"
                          : cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return Status::error(ErrorKind::kNoDevice, "no usable GPU: " + why);
  }
  if (ordinal < 0 || ordinal >= count)
    return Status::error(ErrorKind::kNoDevice, "no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)");
  cudaDeviceProp p;
  e = cudaGetDeviceProperties(&p, ordinal);
  if (e != cudaSuccess) return Status::error(ErrorKind::kDevice, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  const std::string cc = std::to_string(p.major) + "." + std::to_string(p.minor);
  if (p.major * 10 + p.minor < kMinComputeCapability)
    return Status::error(ErrorKind::kNoDevice, std::string(p.name) + " has compute capability " + cc + "; the kernels need 7.5 or newer");
  cudaFuncAttributes attributes{};
  {
    DeviceGuard guard(ordinal);
    if (!guard.ok()) return Status::error(ErrorKind::kDevice, "cannot make CUDA device " + std::to_string(ordinal) + " current");
    e = cudaFuncGetAttributes(&attributes, arch_probe_kernel);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::error(ErrorKind::kNoDevice, std::string(p.name) + " (compute capability " + cc +
                                                   "): this build of iris carries no kernel code it can load (" + cudaGetErrorString(e) +
                                                   "); rebuild with IRIS_CUDA_GENCODE naming it");
  }
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.kernel_arch = attributes.ptxVersion;
  d.l2_bytes = uint64_t(p.l2CacheSize);
  d.total_memory = uint64_t(p.totalGlobalMem);
  d.smem_per_sm = int(p.sharedMemPerMultiprocessor);
  d.smem_reserved_per_block = int(p.reservedSharedMemPerBlock);
  d.smem_optin_per_block = int(p.sharedMemPerBlockOptin);
  d.launch_cache = std::make_shared<LaunchCache>();
  return d;
}

}  // namespace iris
