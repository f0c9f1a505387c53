// The vector path the codecs take (quant/simd.h): the CPU's widest, narrowed by IRIS_CPU_PATH,
// which ctest sets to run every codec test on each path the machine has.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "quant/simd.h"

namespace iris::quant::detail {
namespace {

TEST(CpuPath, FollowsTheEnvironmentWithinWhatTheCpuHas) {
  const char* want = std::getenv("IRIS_CPU_PATH");
  const CpuPath best = cpu_best_path(), path = cpu_path();
  std::printf("CPU's widest path %s; running %s (IRIS_CPU_PATH=%s)\n", cpu_path_name(best), cpu_path_name(path), want ? want : "");
  CpuPath expected = best;
  if (want && std::strcmp(want, "avx2") == 0 && best > CpuPath::kAvx2) expected = CpuPath::kAvx2;
  if (want && std::strcmp(want, "portable") == 0) expected = CpuPath::kPortable;
  EXPECT_EQ(int(path), int(expected));
#ifdef IRIS_X86_INTRINSICS
  EXPECT_EQ(cpu_has_avx512f(), path == CpuPath::kAvx512);  // the intrinsic paths follow it too
  EXPECT_EQ(cpu_has_avx2(), path >= CpuPath::kAvx2);
#endif
}

}  // namespace
}  // namespace iris::quant::detail
