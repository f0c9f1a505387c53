/* An engine's first steps with libiris, in C: open an archive, list its tensors, dequantize
 * one on the CPU.
 *
 *   inspect_dequant ARCHIVE [TENSOR [OUT.f32]]
 *
 * Prints one line per tensor, then dequantizes TENSOR (default: the first quantized one) to
 * F32 and prints its first values; with OUT.f32, also writes all of them there (raw
 * little-endian floats), so a script can compare them with `iris export --dtype f32`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iris/iris.h>

static int fail(const char* what, iris_status s, const char* msg) {
  fprintf(stderr, "inspect_dequant: %s: %s: %s\n", what, iris_status_name(s), msg);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: inspect_dequant ARCHIVE [TENSOR [OUT.f32]]\n");
    return 2;
  }
  if (iris_abi_version() != IRIS_ABI_VERSION) {
    fprintf(stderr, "inspect_dequant: built against ABI %d, loaded %u\n", IRIS_ABI_VERSION, iris_abi_version());
    return 1;
  }
  char msg[512];
  iris_archive* a = NULL;
  iris_status s = iris_archive_open(argv[1], IRIS_OPEN_VERIFY, &a, msg, sizeof msg);
  if (s != IRIS_OK) return fail("open", s, msg);

  const uint64_t n = iris_archive_tensor_count(a);
  printf("archive %s: model_type %s, %llu tensors (libiris %s)\n", argv[1], iris_archive_model_type(a), (unsigned long long)n,
         iris_version_string());
  int64_t chosen = -1;
  for (uint64_t i = 0; i < n; ++i) {
    iris_tensor_info t;
    if ((s = iris_archive_tensor_info(a, i, &t, msg, sizeof msg)) != IRIS_OK) return fail("tensor_info", s, msg);
    printf("tensor %s %s %s [", t.name, iris_format_name(t.format), iris_dtype_name(t.dtype));
    for (uint32_t d = 0; d < t.ndim; ++d) printf(d ? ", %llu" : "%llu", (unsigned long long)t.shape[d]);
    printf("] %u components\n", t.n_components);
    if (argc > 2 ? strcmp(t.name, argv[2]) == 0 : (chosen < 0 && t.format != IRIS_FORMAT_RAW)) chosen = (int64_t)i;
  }
  if (chosen < 0) {
    fprintf(stderr, "inspect_dequant: no tensor %s\n", argc > 2 ? argv[2] : "to dequantize");
    iris_archive_close(a);
    return 1;
  }

  iris_tensor_info t;
  iris_archive_tensor_info(a, (uint64_t)chosen, &t, NULL, 0);
  float* values = malloc(t.numel ? t.numel * sizeof(float) : 1);
  if (!values) return 1;
  s = iris_dequantize(a, (uint64_t)chosen, IRIS_DTYPE_F32, values, t.numel * sizeof(float), 0, msg, sizeof msg);
  if (s != IRIS_OK) return fail("dequantize", s, msg);
  printf("dequantized %s (%s): %llu values:", t.name, iris_format_name(t.format), (unsigned long long)t.numel);
  for (uint64_t i = 0; i < t.numel && i < 4; ++i) printf(" %.6g", values[i]);
  printf("\n");
  if (argc > 3) {
    FILE* f = fopen(argv[3], "wb");
    if (!f || fwrite(values, sizeof(float), t.numel, f) != t.numel || fclose(f) != 0) {
      fprintf(stderr, "inspect_dequant: cannot write %s\n", argv[3]);
      return 1;
    }
  }
  free(values);
  iris_archive_close(a);
  return 0;
}
