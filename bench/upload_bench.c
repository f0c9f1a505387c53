/* Archive upload speed through the C API (iris_cuda_upload: pinned staging buffers filled by
 * parallel reads, overlapped with the copies) against the card's pinned cudaMemcpy H2D
 * bandwidth measured in the same run, and against the naive upload an engine would write
 * (cudaMemcpy of each tensor straight from the read-only mapping, pageable).
 *
 *   iris_upload_bench ARCHIVE [RUNS=5] [THREADS,BUFFER_MIB,BUFFERS ...]
 *
 * The archive is read once first, so every run reads it from the page cache (the issue's
 * condition). Prints one JSON object: medians over RUNS of each figure, in GB/s (10^9). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <iris/iris.h>
#include <iris/iris_cuda.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}



#define CUDA_OK(call)                                                            \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));               \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* Every component of the archive, in manifest order: what an upload copies. */
struct Piece {
  const void* data;
  uint64_t size;
};

static struct Piece* pieces_of(const iris_archive* a, size_t* count) {
  size_t n = 0, cap = 64;
  struct Piece* p = malloc(cap * sizeof *p);
  for (uint64_t i = 0; i < iris_archive_tensor_count(a); ++i) {
    iris_tensor_info t;
    iris_archive_tensor_info(a, i, &t, NULL, 0);
    for (uint32_t c = 0; c < t.n_components; ++c) {
      iris_component_info ci;
      iris_archive_component(a, i, c, &ci, NULL, 0);
      if (n == cap) p = realloc(p, (cap *= 2) * sizeof *p);
      p[n++] = (struct Piece){ci.data, ci.size};
    }
  }
  *count = n;
  return p;
}

/* The host side's ceiling: T threads pread their share of the file (1 MiB at a time) into
 * pinned memory, no GPU copy: what staging can fill at most. */
struct Reader {
  int fd;
  off_t begin, end;
  char* buf;
};

static void* read_share(void* p) {
  struct Reader* r = p;
  for (off_t at = r->begin; at < r->end;) {
    const size_t n = (size_t)(r->end - at < (1 << 20) ? r->end - at : (1 << 20));
    const ssize_t got = pread(r->fd, r->buf, n, at);
    if (got <= 0) break;
    at += got;
  }
  return NULL;
}

static double read_ceiling_gbps(const char* path, int threads, int runs) {
  const int fd = open(path, O_RDONLY);
  const off_t size = lseek(fd, 0, SEEK_END);
  struct Reader* rs = calloc((size_t)threads, sizeof *rs);
  pthread_t* ts = calloc((size_t)threads, sizeof *ts);
  for (int t = 0; t < threads; ++t) CUDA_OK(cudaHostAlloc((void**)&rs[t].buf, 1 << 20, cudaHostAllocDefault));
  double* v = calloc((size_t)runs, sizeof(double));
  for (int r = 0; r < runs; ++r) {
    const double t0 = now();
    for (int t = 0; t < threads; ++t) {
      rs[t].fd = fd;
      rs[t].begin = size / threads * t;
      rs[t].end = t + 1 == threads ? size : size / threads * (t + 1);
      pthread_create(&ts[t], NULL, read_share, &rs[t]);
    }
    for (int t = 0; t < threads; ++t) pthread_join(ts[t], NULL);
    v[r] = size / (now() - t0) / 1e9;
  }
  for (int t = 0; t < threads; ++t) cudaFreeHost(rs[t].buf);
  close(fd);
  const double m = median(v, runs);
  free(v);
  free(rs);
  free(ts);
  return m;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: iris_upload_bench ARCHIVE [RUNS] [THREADS,BUFFER_MIB,BUFFERS ...]\n");
    return 2;
  }
  const int runs = argc > 2 ? atoi(argv[2]) : 5;
  char msg[512];
  if (iris_cuda_device_check(0, msg, sizeof msg) != IRIS_OK) {
    fprintf(stderr, "no usable GPU: %s\n", msg);
    return 77;
  }
  iris_archive* a = NULL;
  if (iris_archive_open(argv[1], 0, &a, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "%s\n", msg), 1;

  /* Warm the page cache: hash everything once (also proves the file intact). */
  double t0 = now();
  if (iris_archive_verify(a, 0, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "%s\n", msg), 1;
  const double verify_s = now() - t0;

  /* Total tensor bytes (and with 256-byte padding, as the upload lays them out), then the
   * ceiling: pinned cudaMemcpy H2D of 1 GiB. */
  size_t n_pieces = 0;
  struct Piece* pieces = pieces_of(a, &n_pieces);
  uint64_t bytes = 0, padded = 0;
  for (size_t i = 0; i < n_pieces; ++i) {
    bytes += pieces[i].size;
    padded += (pieces[i].size + 255) / 256 * 256;
  }
  const size_t probe = (size_t)1 << 30;
  void *host = NULL, *dev = NULL;
  CUDA_OK(cudaHostAlloc(&host, probe, cudaHostAllocDefault));
  CUDA_OK(cudaMalloc(&dev, probe));
  memset(host, 1, probe);
  double* pinned = calloc((size_t)runs, sizeof(double));
  for (int r = -1; r < runs; ++r) {
    t0 = now();
    CUDA_OK(cudaMemcpy(dev, host, probe, cudaMemcpyHostToDevice));
    if (r >= 0) pinned[r] = probe / (now() - t0) / 1e9;
  }
  CUDA_OK(cudaFreeHost(host));
  CUDA_OK(cudaFree(dev));
  const double pinned_gbps = median(pinned, runs);

  /* Naive: one cudaMalloc, then a pageable cudaMemcpy per component from the mapping. */
  double* naive = calloc((size_t)runs, sizeof(double));
  for (int r = 0; r < runs; ++r) {
    t0 = now();
    void* base = NULL;
    CUDA_OK(cudaMalloc(&base, padded ? padded : 1));
    uint64_t at = 0;
    for (size_t i = 0; i < n_pieces; ++i) {
      CUDA_OK(cudaMemcpy((char*)base + at, pieces[i].data, pieces[i].size, cudaMemcpyHostToDevice));
      at += (pieces[i].size + 255) / 256 * 256;
    }
    CUDA_OK(cudaDeviceSynchronize());
    naive[r] = bytes / (now() - t0) / 1e9;
    CUDA_OK(cudaFree(base));
  }

  printf("{\n  \"archive\": \"%s\",\n  \"tensor_bytes\": %llu,\n  \"runs\": %d,\n  \"verify_gbps\": %.2f,\n", argv[1],
         (unsigned long long)bytes, runs, bytes / verify_s / 1e9);
  printf("  \"pinned_memcpy_gbps\": %.2f,\n  \"naive_pageable_gbps\": %.2f,\n", pinned_gbps, median(naive, runs));
  printf("  \"host_pread_gbps\": {\"4\": %.2f, \"8\": %.2f, \"16\": %.2f},\n", read_ceiling_gbps(argv[1], 4, runs),
         read_ceiling_gbps(argv[1], 8, runs), read_ceiling_gbps(argv[1], 16, runs));
  /* Fixed costs: a device check, and an upload of one small tensor (all setup, no data). */
  double* check = calloc((size_t)runs, sizeof(double));
  double* small = calloc((size_t)runs, sizeof(double));
  iris_tensor_info first;
  iris_archive_tensor_info(a, 0, &first, NULL, 0);
  const char* one[] = {first.name};
  for (int r = 0; r < runs; ++r) {
    t0 = now();
    iris_cuda_device_check(0, msg, sizeof msg);
    check[r] = (now() - t0) * 1e3;
    iris_upload_options o;
    iris_upload_options_init(&o);
    o.names = one;
    o.n_names = 1;
    iris_cuda_archive* d = NULL;
    t0 = now();
    if (iris_cuda_upload(a, &o, &d, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "upload: %s\n", msg), 1;
    small[r] = (now() - t0) * 1e3;
    iris_cuda_archive_free(d);
  }
  printf("  \"device_check_ms\": %.2f,\n  \"one_small_tensor_upload_ms\": %.2f,\n", median(check, runs), median(small, runs));
  /* The defaults through one reused uploader: the whole call, pinning paid once before. */
  {
    iris_upload_options o;
    iris_upload_options_init(&o);
    iris_cuda_uploader* u = NULL;
    if (iris_cuda_uploader_create(&o, &u, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "uploader: %s\n", msg), 1;
    double* reused = calloc((size_t)runs, sizeof(double));
    for (int r = 0; r < runs; ++r) {
      iris_cuda_archive* d = NULL;
      t0 = now();
      if (iris_cuda_uploader_upload(u, a, &o, &d, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "upload: %s\n", msg), 1;
      reused[r] = bytes / (now() - t0) / 1e9;
      iris_cuda_archive_free(d);
    }
    const double g = median(reused, runs);
    printf("  \"reused_uploader_whole_call_gbps\": %.2f,\n  \"reused_uploader_whole_call_pct_pinned\": %.1f,\n", g, 100 * g / pinned_gbps);
    iris_cuda_uploader_free(u);
  }
  printf("  \"iris\": [\n");
  /* iris_cuda_upload with each configuration (default: the library's defaults). */
  const int nconf = argc > 3 ? argc - 3 : 1;
  for (int ci = 0; ci < nconf; ++ci) {
    iris_upload_options o;
    iris_upload_options_init(&o);
    if (argc > 3) {
      unsigned threads = 0, mib = 64, nbuf = 4;
      if (sscanf(argv[3 + ci], "%u,%u,%u", &threads, &mib, &nbuf) != 3) return fprintf(stderr, "bad configuration %s\n", argv[3 + ci]), 2;
      o.threads = (int)threads;
      o.staging_bytes = (uint64_t)mib << 20;
      o.staging_buffers = nbuf;
    }
    double* copy = calloc((size_t)runs, sizeof(double));
    double* call = calloc((size_t)runs, sizeof(double));
    for (int r = 0; r < runs; ++r) {
      iris_cuda_archive* d = NULL;
      t0 = now();
      if (iris_cuda_upload(a, &o, &d, msg, sizeof msg) != IRIS_OK) return fprintf(stderr, "upload: %s\n", msg), 1;
      const double whole = now() - t0;
      call[r] = bytes / whole / 1e9;
      copy[r] = bytes / iris_cuda_archive_upload_seconds(d) / 1e9;
      iris_cuda_archive_free(d);
    }
    const double copy_gbps = median(copy, runs), call_gbps = median(call, runs);
    printf("    {\"threads\": %d, \"staging_mib\": %llu, \"buffers\": %u, \"gbps\": %.2f, \"pct_pinned\": %.1f, "
           "\"whole_call_gbps\": %.2f, \"whole_call_pct_pinned\": %.1f}%s\n",
           o.threads, (unsigned long long)(o.staging_bytes >> 20), o.staging_buffers, copy_gbps, 100 * copy_gbps / pinned_gbps, call_gbps,
           100 * call_gbps / pinned_gbps, ci + 1 < nconf ? "," : "");
    free(copy);
    free(call);
  }
  printf("  ]\n}\n");
  iris_archive_close(a);
  return 0;
}
