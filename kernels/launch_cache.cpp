#include "kernels/launch_cache.h"

namespace iris {

namespace {

// The answer `kept` holds for `key`, or the runtime's (`ask(out)`), kept where it succeeded.
// Asked outside the lock: two threads may both ask once, and get the same answer.
template <typename Map, typename Ask>
cudaError_t remembered(std::mutex& mutex, Map& kept, const typename Map::key_type& key, typename Map::mapped_type* out, Ask&& ask) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = kept.find(key); it != kept.end()) {
      *out = it->second;
      return cudaSuccess;
    }
  }
  const cudaError_t e = ask(out);
  if (e == cudaSuccess) {
    std::lock_guard<std::mutex> lock(mutex);
    kept.emplace(key, *out);
  }
  return e;
}

}  // namespace

cudaError_t LaunchCache::blocks_per_sm(const void* kernel, int threads, size_t dynamic, int* out) {
  return remembered(mutex_, blocks_, Key{kernel, threads, dynamic}, out,
                    [&](int* o) { return cudaOccupancyMaxActiveBlocksPerMultiprocessor(o, kernel, threads, dynamic); });
}

cudaError_t LaunchCache::attributes(const void* kernel, cudaFuncAttributes* out) {
  return remembered(mutex_, attributes_, kernel, out, [&](cudaFuncAttributes* o) { return cudaFuncGetAttributes(o, kernel); });
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
