#include "tests/kernels/late_writer.h"

#include "kernels/grid_dependency.cuh"

namespace iris::test {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void late_writer_kernel(uint8_t* dst, const uint8_t* src, size_t bytes, uint64_t spin_ns) {
  dev::release_dependents();
  const uint64_t start = global_ns();
  while (global_ns() - start < spin_ns) {
  }
  for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_late_writer(void* dst, const void* src, size_t bytes, uint64_t spin_ns, cudaStream_t stream) {
  late_writer_kernel<<<1, 256, 0, stream>>>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes, spin_ns);
  return cudaGetLastError();
}

cudaError_t write_late(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = cudaMemset(dst, 0, bytes); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return e;
  return launch_late_writer(dst, src, bytes, 200000, stream);
}

}  // namespace iris::test
