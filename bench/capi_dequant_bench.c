/* Times iris_dequantize (FP32 out) of an archive's largest quantized tensor through the
 * public C API, as an engine calls it: REPEATS calls, each one's wall time printed in ms.
 * For issue 24's waiting-threads figures (docs/BENCHMARKS.md), run on an idle machine and
 * beside other work (e.g. `yes > /dev/null` on every core).
 *   cc -O2 bench/capi_dequant_bench.c -Iinclude -Lbuild/api -liris -Wl,-rpath,$PWD/build/api -o capi_dequant_bench
 *   ./capi_dequant_bench ARCHIVE [REPEATS [THREADS]] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "iris/iris.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ARCHIVE [REPEATS [THREADS]]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? atoi(argv[2]) : 5, threads = argc > 3 ? atoi(argv[3]) : 0;
  char msg[512];
  iris_archive* a = NULL;
  if (iris_archive_open(argv[1], 0, &a, msg, sizeof msg) != IRIS_OK) {
    fprintf(stderr, "%s\n", msg);
    return 1;
  }
  uint64_t best = 0, best_numel = 0;
  for (uint64_t i = 0; i < iris_archive_tensor_count(a); ++i) {
    iris_tensor_info t;
    if (iris_archive_tensor_info(a, i, &t, NULL, 0) == IRIS_OK && t.format != IRIS_FORMAT_RAW && t.numel > best_numel) best = i, best_numel = t.numel;
  }
  float* out = malloc(best_numel * sizeof(float));
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_ms();
    if (iris_dequantize(a, best, IRIS_DTYPE_F32, out, best_numel * sizeof(float), threads, msg, sizeof msg) != IRIS_OK) {
      fprintf(stderr, "%s\n", msg);
      return 1;
    }
    printf("%.1f ms (%llu values)\n", now_ms() - t0, (unsigned long long)best_numel);
  }
  free(out);
  iris_archive_close(a);
  return 0;
}
