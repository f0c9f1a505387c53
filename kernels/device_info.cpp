#include "kernels/device_info.h"

#include <cuda_runtime.h>

namespace iris {

Result<DeviceInfo> query_device(int ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return Status::error(ErrorKind::kNoDevice, "no usable GPU (" + why + ")");
  }
  if (ordinal < 0 || ordinal >= count)
    return Status::error(ErrorKind::kNoDevice, "no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)");
  cudaDeviceProp p;
  e = cudaGetDeviceProperties(&p, ordinal);
  if (e != cudaSuccess) return Status::error(ErrorKind::kDevice, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  if (p.major < 9)
    return Status::error(ErrorKind::kNoDevice, std::string(p.name) + " has compute capability " + std::to_string(p.major) + "." +
                                                   std::to_string(p.minor) + "; the kernels need 9.0 or newer");
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = uint64_t(p.l2CacheSize);
  d.total_memory = uint64_t(p.totalGlobalMem);
  return d;
}

}  // namespace iris
