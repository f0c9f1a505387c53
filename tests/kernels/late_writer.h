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

// The set-up every late-input test shares: `bytes` of dst zeroed, the device idle, then the
// late writer on `stream` copying src (device memory) there 200 us later. The kernel launched
// next on `stream` must see src's bytes, not the zeros.
cudaError_t write_late(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace iris::test
