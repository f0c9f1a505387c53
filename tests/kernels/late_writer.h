// A producer kernel for the programmatic-launch tests (kernels/grid_dependency.cuh): it lets
// its dependents start at once, then waits `spin_ns` on the GPU's clock before it copies
// `bytes` from src to dst. A dependent launched programmatically after it that read its
// inputs before dev::wait_for_producer() would read dst's old contents.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace iris::test {

cudaError_t launch_late_writer(void* dst, const void* src, size_t bytes, uint64_t spin_ns, cudaStream_t stream);

}  // namespace iris::test
