// The CUDA runtime's answers to the questions a launch asks before it launches -- how many
// blocks of a kernel fit a SM at a block size and dynamic shared memory, and a kernel's own
// attributes -- asked once per device and kept by the owner of the launches (DeviceInfo, so a
// DeviceArchive, verify, the benchmark), never in a process-wide table. A tensor-core GEMV
// asked from 2 to about 20 of them at every launch (counted in the source: up to 8 for its warp
// count, 3 for the spread, 3 for NF4's table_binds, the warp count again for the twin); eagerly
// (no CUDA graph) a GEMV launch through the C API took the host 7.2-13.5 us with them and
// 5.2-5.7 us with this cache (H200 host, bench/launch_host_cost.py, kernels/NOTES.md v63).
// Under a graph they cost nothing either way.
//
// Thread-safe: the C API may launch from several threads on one archive. The answers are the
// runtime's own, so a launch decides exactly as without the cache; a failed query is not kept
// (it is asked again next time, and the caller sees the error as before).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace iris {

class LaunchCache {
 public:
  // cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, threads, dynamic), remembered.
  cudaError_t blocks_per_sm(const void* kernel, int threads, size_t dynamic, int* out);
  // cudaFuncGetAttributes(out, kernel), remembered until raise_dynamic_smem changes it.
  cudaError_t attributes(const void* kernel, cudaFuncAttributes* out);
  // cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes), and the remembered
  // attributes and occupancy of that kernel forgotten (the allowance bounds both).
  cudaError_t raise_dynamic_smem(const void* kernel, int bytes);

 private:
  struct Key {
    const void* kernel;
    int threads;
    size_t dynamic;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>{}(k.kernel) ^ (size_t(k.threads) * 0x9e3779b97f4a7c15ull) ^ (k.dynamic * 0xc2b2ae3d27d4eb4full);
    }
  };
  std::mutex mutex_;
  std::unordered_map<Key, int, KeyHash> blocks_;
  std::unordered_map<const void*, cudaFuncAttributes> attributes_;
};

// The queries through `cache`, or straight to the runtime where there is none (a LaunchConfig
// built by hand).
cudaError_t blocks_per_sm(LaunchCache* cache, const void* kernel, int threads, size_t dynamic, int* out);
cudaError_t kernel_attributes(LaunchCache* cache, const void* kernel, cudaFuncAttributes* out);
cudaError_t raise_dynamic_smem(LaunchCache* cache, const void* kernel, int bytes);

}  // namespace iris
