/* Times iris_archive_open + iris_archive_close through the C API (issue 24 item 5): what an
 * engine pays before it can read the first tensor of a big archive.
 *
 *   iris_archive_open_bench ARCHIVE [RUNS=5] [FLAGS=0]
 *
 * Prints the tensor count, then each run's seconds and the median. FLAGS=1 adds
 * IRIS_OPEN_VERIFY (every checksum), which measures hashing, not the manifest. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <iris/iris.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: iris_archive_open_bench ARCHIVE [RUNS=5] [FLAGS=0]\n");
    return 2;
  }
  const int runs = argc > 2 ? atoi(argv[2]) : 5;
  const unsigned flags = argc > 3 ? (unsigned)atoi(argv[3]) : 0u;
  if (runs < 1 || runs > 1000) {
    fprintf(stderr, "iris_archive_open_bench: RUNS must be 1..1000\n");
    return 2;
  }
  double* secs = malloc(sizeof(double) * (size_t)runs);
  if (!secs) return 1;
  char msg[512];
  for (int i = 0; i < runs; ++i) {
    iris_archive* a = NULL;
    const double t0 = now();
    const iris_status s = iris_archive_open(argv[1], flags, &a, msg, sizeof msg);
    if (s != IRIS_OK) {
      fprintf(stderr, "iris_archive_open_bench: %s: %s\n", iris_status_name(s), msg);
      free(secs);
      return 1;
    }
    const unsigned long long n = (unsigned long long)iris_archive_tensor_count(a);
    iris_archive_close(a);
    secs[i] = now() - t0;
    printf("run %d: %llu tensors, %.4f s\n", i + 1, n, secs[i]);
  }
  qsort(secs, (size_t)runs, sizeof(double), by_value);
  printf("median open+close: %.4f s (min %.4f, max %.4f, %d runs, flags %u)\n", secs[runs / 2], secs[0], secs[runs - 1], runs,
         flags);
  free(secs);
  return 0;
}
