/* What a libiris call costs the process it runs in (issue 24 item 6): HOST_THREADS threads of
 * the "engine" count loop iterations while the main thread dequantizes every quantized tensor
 * of ARCHIVE through the C API (FP32 out), ROUNDS times, with a pause of PAUSE_MS between
 * tensors (an engine does other work between loads). Prints the dequant time per round and the
 * host threads' loop rate during the run as a fraction of their rate alone (measured first):
 * a library whose idle threads spin between calls takes CPU from the host's threads even
 * while it is not being called.
 *   cc -O2 -pthread bench/capi_host_bench.c -Iinclude -Lbuild/api -l:libiris.so.1 -Wl,-rpath,$PWD/build/api -o capi_host_bench
 *   ./capi_host_bench ARCHIVE [ROUNDS [HOST_THREADS [PAUSE_MS]]] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "iris/iris.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static atomic_int stop;
static atomic_ullong host_loops;

static void* host_work(void* arg) {
  (void)arg;
  volatile double x = 1.0;
  unsigned long long local = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 10000; ++i) x = x * 1.0000001 + 1e-9;
    if (++local % 16 == 0) atomic_fetch_add_explicit(&host_loops, 16, memory_order_relaxed);
  }
  return NULL;
}

static void pause_ms(int ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ARCHIVE [ROUNDS [HOST_THREADS [PAUSE_MS]]]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? atoi(argv[2]) : 5, hosts = argc > 3 ? atoi(argv[3]) : 2, pause = argc > 4 ? atoi(argv[4]) : 2;
  char msg[512];
  iris_archive* a = NULL;
  if (iris_archive_open(argv[1], 0, &a, msg, sizeof msg) != IRIS_OK) {
    fprintf(stderr, "%s\n", msg);
    return 1;
  }
  uint64_t most = 0;
  for (uint64_t i = 0; i < iris_archive_tensor_count(a); ++i) {
    iris_tensor_info t;
    if (iris_archive_tensor_info(a, i, &t, NULL, 0) == IRIS_OK && t.numel > most) most = t.numel;
  }
  float* out = malloc(most * sizeof(float));
  pthread_t th[64];
  for (int h = 0; h < hosts && h < 64; ++h) pthread_create(&th[h], NULL, host_work, NULL);

  pause_ms(200);  // the host threads' rate alone, over one second
  unsigned long long l0 = atomic_load(&host_loops);
  double t0 = now_s();
  pause_ms(1000);
  const double alone = (atomic_load(&host_loops) - l0) / (now_s() - t0);

  double pauses = 0;
  l0 = atomic_load(&host_loops);
  t0 = now_s();
  for (int r = 0; r < rounds; ++r) {
    double busy = 0;
    for (uint64_t i = 0; i < iris_archive_tensor_count(a); ++i) {
      iris_tensor_info t;
      if (iris_archive_tensor_info(a, i, &t, NULL, 0) != IRIS_OK || t.format == IRIS_FORMAT_RAW) continue;
      const double c0 = now_s();
      if (iris_dequantize(a, i, IRIS_DTYPE_F32, out, t.numel * sizeof(float), 0, msg, sizeof msg) != IRIS_OK) {
        fprintf(stderr, "%s\n", msg);
        return 1;
      }
      busy += now_s() - c0;
      const double p0 = now_s();
      pause_ms(pause);
      pauses += now_s() - p0;
    }
    printf("round %d: dequant %.1f ms\n", r, busy * 1e3);
  }
  const double total = now_s() - t0, during = (atomic_load(&host_loops) - l0) / total;
  atomic_store(&stop, 1);
  for (int h = 0; h < hosts && h < 64; ++h) pthread_join(th[h], NULL);
  printf("host threads: %d; their rate during the run / alone: %.3f (%.0f s of pauses in %.1f s)\n", hosts, during / alone, pauses, total);
  free(out);
  iris_archive_close(a);
  return 0;
}
