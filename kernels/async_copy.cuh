// Global -> shared copies that do not hold registers while they wait (cp.async, sm_80 and
// newer). Before sm_80 the same calls copy synchronously, so a body written with them is
// correct everywhere (the tensor-core GEMV that uses them runs only from sm_80 anyway).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iris::dev {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define IRIS_ARCH_CP_ASYNC 1
#else
#define IRIS_ARCH_CP_ASYNC 0
#endif

// Copies kBytes (8 or 16; both addresses aligned to it). 16-byte copies bypass L1 (.cg):
// weights are read once. The "memory" clobbers keep the compiler from moving shared-memory
// reads of a slot across the copy that refills it.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  static_assert(kBytes == 8 || kBytes == 16, "cp.async copies 8 or 16 bytes here");
#if IRIS_ARCH_CP_ASYNC
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  if constexpr (kBytes == 16) *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
  else *static_cast<uint2*>(smem) = *static_cast<const uint2*>(gmem);
#endif
}

// Closes the group of copies issued since the last commit (an empty group is allowed).
__device__ __forceinline__ void cp_async_commit() {
#if IRIS_ARCH_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if IRIS_ARCH_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace iris::dev
