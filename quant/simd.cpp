#include "quant/simd.h"

#include <cstdlib>
#include <cstring>

namespace iris::quant::detail {

CpuPath cpu_best_path() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const CpuPath best = [] {
    __builtin_cpu_init();
    const bool v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
                    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (v4) return CpuPath::kAvx512;
    return __builtin_cpu_supports("avx2") ? CpuPath::kAvx2 : CpuPath::kPortable;
  }();
  return best;
#else
  return CpuPath::kPortable;
#endif
}

CpuPath cpu_path() {
  static const CpuPath path = [] {
    const CpuPath best = cpu_best_path();
    const char* want = std::getenv("IRIS_CPU_PATH");
    CpuPath asked = best;
    if (want && std::strcmp(want, "avx2") == 0) asked = CpuPath::kAvx2;
    if (want && std::strcmp(want, "portable") == 0) asked = CpuPath::kPortable;
    return asked < best ? asked : best;
  }();
  return path;
}

const char* cpu_path_name(CpuPath p) {
  switch (p) {
    case CpuPath::kAvx512: return "avx512";
    case CpuPath::kAvx2: return "avx2";
    default: return "portable";
  }
}

}  // namespace iris::quant::detail
