// Programmatic dependent launch, the device side (sm_90 and newer; no-ops before).
//
// A kernel launched with the programmatic stream serialization attribute (launch.h) may start
// while the kernel before it in the stream is still finishing: its blocks are scheduled as
// soon as every block of the producer has called release_dependents() or exited. Whatever
// such a kernel does before wait_for_producer() may touch only memory the producer neither
// writes nor reads -- the archive's weights, which no kernel of a decode step writes; and for
// attention the position, the cache rows before it and the rotary tables, which the kernel
// just before it never writes (decode_ops.h states that contract) -- and everything after it
// sees the producer's writes. So each kernel issues those loads, waits, and only then reads
// activations, router picks or q/k/v and writes outputs. Each kernel releases its dependents
// only after its own wait, so when a kernel starts, every kernel before its producer has ended.
// This hides the launch and the first DRAM round trip of one kernel behind the end of the
// previous one: where a decode step is a chain of short kernels, that gap is a large part of
// each (kernels/NOTES.md, run v46).
//
// A kernel compiled without these instructions (code for an architecture before sm_90, e.g.
// the compute_80 PTX that an H100 can JIT) must never get the attribute: it would read its
// inputs before the producer wrote them. The host decides from the loaded code's
// architecture (LaunchConfig::kernel_arch), never from the device's compute capability.
#pragma once

#include <cstdint>

#include "kernels/arch.cuh"

namespace iris::dev {

// Blocks until the producer grid has completed and its writes are visible. Returns at once
// for a kernel launched without the attribute.
__device__ __forceinline__ void wait_for_producer() {
#if IRIS_ARCH_GRID_DEPENDENCY
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream be scheduled once every block of this one has called it
// or exited. It orders nothing: the dependent still waits for this grid's completion.
__device__ __forceinline__ void release_dependents() {
#if IRIS_ARCH_GRID_DEPENDENCY
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Starts bringing [p, p + bytes) into L2 with one instruction (bytes a multiple of 16), so
// that a block's later loads of its weights hit L2 or join a request already in flight.
// Nothing before sm_90, nor for an address the instruction cannot take (not 16-byte aligned).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if IRIS_ARCH_GRID_DEPENDENCY
  if (bytes && (reinterpret_cast<uintptr_t>(p) & 15u) == 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

}  // namespace iris::dev
