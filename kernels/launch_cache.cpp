#include "kernels/launch_cache.h"

namespace iris {

cudaError_t LaunchCache::blocks_per_sm(const void* kernel, int threads, size_t dynamic, int* out) {
  const Key key{kernel, threads, dynamic};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = blocks_.find(key); it != blocks_.end()) {
      *out = it->second;
      return cudaSuccess;
    }
  }
  // Asked outside the lock: two threads may both ask once, and get the same answer.
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, threads, dynamic);
  if (e == cudaSuccess) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.emplace(key, *out);
  }
  return e;
}

cudaError_t LaunchCache::attributes(const void* kernel, cudaFuncAttributes* out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = attributes_.find(kernel); it != attributes_.end()) {
      *out = it->second;
      return cudaSuccess;
    }
  }
  const cudaError_t e = cudaFuncGetAttributes(out, kernel);
  if (e == cudaSuccess) {
    std::lock_guard<std::mutex> lock(mutex_);
    attributes_.emplace(kernel, *out);
  }
  return e;
}

cudaError_t LaunchCache::raise_dynamic_smem(const void* kernel, int bytes) {
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  attributes_.erase(kernel);
  std::erase_if(blocks_, [kernel](const auto& entry) { return entry.first.kernel == kernel; });
  return e;
}

cudaError_t blocks_per_sm(LaunchCache* cache, const void* kernel, int threads, size_t dynamic, int* out) {
  return cache ? cache->blocks_per_sm(kernel, threads, dynamic, out) : cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, threads, dynamic);
}

cudaError_t kernel_attributes(LaunchCache* cache, const void* kernel, cudaFuncAttributes* out) {
  return cache ? cache->attributes(kernel, out) : cudaFuncGetAttributes(out, kernel);
}

cudaError_t raise_dynamic_smem(LaunchCache* cache, const void* kernel, int bytes) {
  return cache ? cache->raise_dynamic_smem(kernel, bytes) : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace iris
