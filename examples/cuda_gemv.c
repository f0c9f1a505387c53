/* Running iris's kernels from an engine, in C: upload an archive to the GPU through the
 * pinned staging pipeline, then one fused dequant-GEMV (batch 1) on a stream of ours, checked
 * against a double-precision product of the CPU-dequantized weights.
 *
 *   cuda_gemv ARCHIVE [TENSOR]
 *
 * Exits 0 when the GEMV agrees, 1 when it does not, 77 (skipped) when no usable GPU is here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <iris/iris.h>
#include <iris/iris_cuda.h>

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* nearest even; inputs are finite */
}
static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cuda_gemv ARCHIVE [TENSOR]\n");
    return 2;
  }
  char msg[512];
  if (iris_cuda_device_check(0, msg, sizeof msg) != IRIS_OK) {
    printf("skipped: %s\n", msg);
    return 77;
  }
  iris_archive* a = NULL;
  iris_status s = iris_archive_open(argv[1], 0, &a, msg, sizeof msg);
  if (s != IRIS_OK) return fprintf(stderr, "open: %s\n", msg), 1;

  iris_upload_options o;
  iris_upload_options_init(&o);
  o.verify = 1;
  iris_cuda_archive* d = NULL;
  if ((s = iris_cuda_upload(a, &o, &d, msg, sizeof msg)) != IRIS_OK) return fprintf(stderr, "upload: %s\n", msg), 1;
  printf("uploaded %llu tensors, %llu device bytes in %.3f s\n", (unsigned long long)iris_cuda_archive_tensor_count(d),
         (unsigned long long)iris_cuda_archive_device_bytes(d), iris_cuda_archive_upload_seconds(d));

  /* The named tensor, or the first tiled quantized one. */
  uint64_t index = UINT64_MAX;
  iris_tensor_info t;
  for (uint64_t i = 0; i < iris_archive_tensor_count(a); ++i) {
    iris_archive_tensor_info(a, i, &t, NULL, 0);
    if (argc > 2 ? strcmp(t.name, argv[2]) == 0 : (t.format != IRIS_FORMAT_RAW && t.layout.kind == IRIS_LAYOUT_TILED)) {
      index = i;
      break;
    }
  }
  if (index == UINT64_MAX) return fprintf(stderr, "no tensor to run\n"), 1;
  const iris_cuda_tensor* w = NULL;
  if ((s = iris_cuda_archive_find_tensor(d, t.name, &w, msg, sizeof msg)) != IRIS_OK) return fprintf(stderr, "%s\n", msg), 1;
  const uint64_t rows = t.rows, k = t.numel / t.rows;

  uint16_t* x = malloc(k * 2);
  float* y = malloc(rows * 4);
  float* ref_w = malloc(t.numel * 4);
  srand(7);
  for (uint64_t i = 0; i < k; ++i) x[i] = to_bf16((float)rand() / RAND_MAX * 2.f - 1.f);
  void *dx = NULL, *dy = NULL;
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess || cudaMalloc(&dx, k * 2) != cudaSuccess || cudaMalloc(&dy, rows * 4) != cudaSuccess ||
      cudaMemcpyAsync(dx, x, k * 2, cudaMemcpyHostToDevice, stream) != cudaSuccess)
    return fprintf(stderr, "CUDA setup failed\n"), 1;
  if ((s = iris_cuda_gemv(w, dx, 1, dy, IRIS_DTYPE_F32, stream, msg, sizeof msg)) != IRIS_OK) return fprintf(stderr, "gemv: %s\n", msg), 1;
  if (cudaMemcpyAsync(y, dy, rows * 4, cudaMemcpyDeviceToHost, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess)
    return fprintf(stderr, "CUDA copy failed\n"), 1;

  /* Reference: the CPU dequantization (bit-exact with the GPU's) times x, in double. The
   * tensor-core path's FP32 accumulation error is far below 1e-2 of sum |w x| for these K. */
  if ((s = iris_dequantize(a, index, IRIS_DTYPE_F32, ref_w, t.numel * 4, 0, msg, sizeof msg)) != IRIS_OK)
    return fprintf(stderr, "dequantize: %s\n", msg), 1;
  double worst = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    double sum = 0, mag = 0;
    for (uint64_t c = 0; c < k; ++c) {
      sum += (double)ref_w[r * k + c] * from_bf16(x[c]);
      mag += fabs((double)ref_w[r * k + c] * from_bf16(x[c]));
    }
    const double err = mag > 0 ? fabs(y[r] - sum) / mag : fabs(y[r]);
    if (err > worst) worst = err;
  }
  printf("gemv %s (%s, %llux%llu, %s): worst error %.3g of sum|w x|\n", t.name, iris_format_name(t.format), (unsigned long long)rows,
         (unsigned long long)k, iris_cuda_gemv_uses_tensor_cores(w, 1) ? "tensor cores" : "CUDA cores", worst);
  const int ok = worst < 1e-3;
  printf("%s\n", ok ? "OK" : "MISMATCH");
  cudaFree(dx);
  cudaFree(dy);
  cudaStreamDestroy(stream);
  free(x);
  free(y);
  free(ref_w);
  iris_cuda_archive_free(d);
  iris_archive_close(a);
  return ok ? 0 : 1;
}
