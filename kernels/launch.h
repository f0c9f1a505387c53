// Kernel launches, plain or as a programmatic dependent of the kernel before them in the stream
// (kernels/grid_dependency.cuh has the device side and the rule that makes it safe). CUDA
// graph capture keeps the attribute as a programmatic edge, so a replayed decode step gets it.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace iris {

// Launches kernel<<<grid, block, dynamic_smem, stream>>>(args...), with programmatic stream
// serialization when `programmatic` (only for kernels that call dev::wait_for_producer()
// before their first read of what the kernel before them may write -- grid_dependency.cuh
// says what they may read earlier -- in code the device loaded for sm_90 or newer:
// programmatic_launch() in tuning.h decides).
template <typename... Params, typename... Args>
cudaError_t launch_kernel_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem, cudaStream_t stream, bool programmatic,
                               Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  config.attrs = programmatic ? &attribute : nullptr;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// launch_kernel_smem with no dynamic shared memory.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool programmatic, Args&&... args) {
  return launch_kernel_smem(kernel, grid, block, 0, stream, programmatic, std::forward<Args>(args)...);
}

// The architecture of the code the current device loaded for `kernel` (its ptxVersion, as
// DeviceInfo::kernel_arch), for launchers that get no LaunchConfig; 0 when it cannot be read.
template <typename... Params>
int loaded_kernel_arch(void (*kernel)(Params...)) {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; leave no error behind for the caller's next check
    return 0;
  }
  return attributes.ptxVersion;
}

}  // namespace iris
