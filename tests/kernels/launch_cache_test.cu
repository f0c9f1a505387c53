// LaunchCache (kernels/launch_cache.h) against the CUDA runtime it stands in for: the same
// occupancy and attributes as the runtime answers, a raised shared-memory allowance seen at
// once (not a stale answer), the same answers from many threads at once, and the runtime
// asked directly where a LaunchConfig has no cache. Needs a GPU; skips, saying so, without.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kernels/device_guard.h"
#include "kernels/device_info.h"
#include "kernels/launch_cache.h"

namespace iris {
namespace {

// Dynamic shared memory and enough registers that occupancy depends on both.
__global__ void cache_probe_kernel(float* out) {
  extern __shared__ float dynamic[];
  __shared__ float fixed[1024];
  fixed[threadIdx.x % 1024] = float(threadIdx.x);
  dynamic[threadIdx.x] = fixed[(threadIdx.x * 7) % 1024];
  __syncthreads();
  if (out) out[threadIdx.x] = dynamic[(threadIdx.x + 1) % blockDim.x];
}

class LaunchCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = query_device(0);
    if (!d.is_ok()) GTEST_SKIP() << "no CUDA GPU device here (" << d.status().message() << "); this runs on the GPU machine";
    device_ = *d;
    kernel_ = reinterpret_cast<const void*>(cache_probe_kernel);
  }
  DeviceInfo device_;
  const void* kernel_ = nullptr;
};

TEST_F(LaunchCacheTest, QueryDeviceGivesEachDeviceInfoACacheItsLaunchConfigsShare) {
  ASSERT_NE(device_.launch_cache, nullptr);
  EXPECT_EQ(device_.launch_config().cache, device_.launch_cache);
}

TEST_F(LaunchCacheTest, AnswersAsTheRuntimeDoesAndTheSameWhenAskedAgain) {
  LaunchCache cache;
  for (int threads : {32, 128, 256, 1024}) {
    for (size_t dynamic : {size_t(0), size_t(4096), size_t(threads) * 4, size_t(40000)}) {
      int runtime = -1, cached = -1, again = -1;
      ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime, kernel_, threads, dynamic), cudaSuccess);
      ASSERT_EQ(cache.blocks_per_sm(kernel_, threads, dynamic, &cached), cudaSuccess);
      ASSERT_EQ(cache.blocks_per_sm(kernel_, threads, dynamic, &again), cudaSuccess);
      EXPECT_EQ(cached, runtime) << threads << " threads, " << dynamic << " bytes";
      EXPECT_EQ(again, runtime) << threads << " threads, " << dynamic << " bytes, asked again";
    }
  }
  cudaFuncAttributes runtime{}, cached{};
  ASSERT_EQ(cudaFuncGetAttributes(&runtime, kernel_), cudaSuccess);
  ASSERT_EQ(cache.attributes(kernel_, &cached), cudaSuccess);
  EXPECT_EQ(cached.sharedSizeBytes, runtime.sharedSizeBytes);
  EXPECT_EQ(cached.numRegs, runtime.numRegs);
  EXPECT_EQ(cached.maxDynamicSharedSizeBytes, runtime.maxDynamicSharedSizeBytes);
  EXPECT_EQ(cached.ptxVersion, runtime.ptxVersion);
}

TEST_F(LaunchCacheTest, ARaisedAllowanceIsSeenAtOnce) {
  LaunchCache cache;
  cudaFuncAttributes before{};
  ASSERT_EQ(cache.attributes(kernel_, &before), cudaSuccess);
  const int most = device_.smem_optin_per_block - int(before.sharedSizeBytes);
  if (most <= before.maxDynamicSharedSizeBytes) GTEST_SKIP() << "this device opts in to no more than the default allowance";
  // An answer kept at the old allowance, then the allowance raised through the cache.
  int kept = -1;
  const size_t big = size_t(most);
  (void)cache.blocks_per_sm(kernel_, 128, big, &kept);
  (void)cudaGetLastError();
  ASSERT_EQ(cache.raise_dynamic_smem(kernel_, most), cudaSuccess);
  cudaFuncAttributes after{};
  ASSERT_EQ(cache.attributes(kernel_, &after), cudaSuccess);
  EXPECT_EQ(after.maxDynamicSharedSizeBytes, most);
  int runtime = -1, cached = -1;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime, kernel_, 128, big), cudaSuccess);
  ASSERT_EQ(cache.blocks_per_sm(kernel_, 128, big, &cached), cudaSuccess);
  EXPECT_EQ(cached, runtime);
  EXPECT_GE(cached, 1) << "a block of the most shared memory a block may take fits a SM";
  // A launch at that size runs (the allowance is the runtime's, not only the cache's).
  cache_probe_kernel<<<1, 128, big>>>(nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(LaunchCacheTest, ManyThreadsGetTheRuntimesAnswers) {
  LaunchCache cache;
  int runtime = -1;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime, kernel_, 256, 8192), cudaSuccess);
  std::vector<int> got(8, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      DeviceGuard guard(device_.ordinal);
      for (int i = 0; i < 200; ++i) {
        int v = -1;
        if (cache.blocks_per_sm(kernel_, 256, 8192, &v) != cudaSuccess || (got[t] >= 0 && v != got[t])) {
          got[t] = -2;
          return;
        }
        got[t] = v;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(got[t], runtime) << "thread " << t;
}

TEST_F(LaunchCacheTest, WithoutACacheTheRuntimeIsAsked) {
  int runtime = -1, direct = -1;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime, kernel_, 64, 1024), cudaSuccess);
  ASSERT_EQ(blocks_per_sm(nullptr, kernel_, 64, 1024, &direct), cudaSuccess);
  EXPECT_EQ(direct, runtime);
  cudaFuncAttributes a{}, b{};
  ASSERT_EQ(cudaFuncGetAttributes(&a, kernel_), cudaSuccess);
  ASSERT_EQ(kernel_attributes(nullptr, kernel_, &b), cudaSuccess);
  EXPECT_EQ(a.sharedSizeBytes, b.sharedSizeBytes);
  EXPECT_EQ(a.numRegs, b.numRegs);
}

}  // namespace
}  // namespace iris
