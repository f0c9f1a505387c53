// The CUDA half of the C API in a build without CUDA: every call says so (IRIS_ERR_NO_DEVICE),
// so engines and the Python package link and load the same symbols either way.
#include "api/c_api_internal.h"
#include "iris/iris_cuda.h"

using iris::capi::fail;

namespace {
const char* kNoCuda = "this libiris was built without CUDA (configure with -DIRIS_CUDA=ON)";
}

extern "C" {

int iris_has_cuda(void) { return 0; }

iris_status iris_cuda_device_check(int, char* msg, size_t msg_size) { return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size); }

void iris_upload_options_init(iris_upload_options* o) {
  if (!o) return;
  *o = iris_upload_options{};
  o->staging_bytes = 4ull << 20;  // kernels/device_archive.h StagingOptions
  o->staging_buffers = 8;
}

iris_status iris_cuda_upload(const iris_archive*, const iris_upload_options*, iris_cuda_archive** out, char* msg, size_t msg_size) {
  if (out) *out = nullptr;
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

void iris_cuda_archive_free(iris_cuda_archive*) {}
iris_status iris_cuda_uploader_create(const iris_upload_options*, iris_cuda_uploader** out, char* msg, size_t msg_size) {
  if (out) *out = nullptr;
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
void iris_cuda_uploader_free(iris_cuda_uploader*) {}
iris_status iris_cuda_uploader_upload(iris_cuda_uploader*, const iris_archive*, const iris_upload_options*, iris_cuda_archive** out,
                                      char* msg, size_t msg_size) {
  if (out) *out = nullptr;
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
uint64_t iris_cuda_archive_device_bytes(const iris_cuda_archive*) { return 0; }
double iris_cuda_archive_upload_seconds(const iris_cuda_archive*) { return 0; }
uint64_t iris_cuda_archive_tensor_count(const iris_cuda_archive*) { return 0; }

iris_status iris_cuda_archive_tensor(const iris_cuda_archive*, uint64_t, const iris_cuda_tensor**, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
iris_status iris_cuda_archive_find_tensor(const iris_cuda_archive*, const char*, const iris_cuda_tensor**, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
void iris_cuda_tensor_info(const iris_cuda_tensor*, iris_tensor_info*) {}
const void* iris_cuda_tensor_component(const iris_cuda_tensor*, iris_role) { return nullptr; }
iris_status iris_cuda_dequantize(const iris_cuda_tensor*, iris_dtype, void*, size_t, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
iris_status iris_cuda_gemv(const iris_cuda_tensor*, const uint16_t*, int, void*, iris_dtype, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
iris_status iris_cuda_gemv_matrix(const iris_cuda_tensor*, uint64_t, const uint16_t*, int, void*, iris_dtype, iris_cuda_stream, char* msg,
                                  size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
int iris_cuda_gemv_uses_tensor_cores(const iris_cuda_tensor*, int) { return 0; }
iris_status iris_cuda_experts_create(const iris_cuda_tensor* const*, uint64_t, iris_cuda_experts** out, char* msg, size_t msg_size) {
  if (out) *out = nullptr;
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}
void iris_cuda_experts_free(iris_cuda_experts*) {}
uint64_t iris_cuda_experts_count(const iris_cuda_experts*) { return 0; }
uint64_t iris_cuda_experts_n(const iris_cuda_experts*) { return 0; }
uint64_t iris_cuda_experts_k(const iris_cuda_experts*) { return 0; }
int iris_cuda_experts_use_tensor_cores(const iris_cuda_experts*) { return 0; }
iris_status iris_cuda_gemv_experts(const iris_cuda_experts*, const int32_t*, const int32_t*, uint64_t, const uint16_t*, uint64_t, void*,
                                   iris_dtype, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_gemv_experts_swiglu(const iris_cuda_experts*, const int32_t*, const int32_t*, uint64_t, const uint16_t*, uint64_t,
                                          const uint16_t*, float, float, uint16_t*, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_gemv_experts_gated(const iris_cuda_experts*, const int32_t*, const int32_t*, uint64_t, const uint16_t*, uint64_t,
                                         uint32_t*, uint16_t*, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

uint64_t iris_cuda_experts_gated_exchange(const iris_cuda_experts*, uint64_t) { return 0; }
int iris_cuda_experts_gated_in_launch(const iris_cuda_experts*) { return 0; }
uint64_t iris_cuda_experts_dequantize_workspace(const iris_cuda_experts*, uint64_t) { return 0; }
iris_status iris_cuda_experts_dequantize(const iris_cuda_experts*, const int32_t*, uint64_t, void*, size_t, iris_dtype, void*, size_t,
                                         iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_moe_route(const uint16_t*, uint64_t, const uint16_t*, const uint16_t*, uint64_t, uint64_t, uint64_t, uint16_t*,
                                uint16_t*, int32_t*, uint32_t*, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_gemv_bf16(const uint16_t*, uint64_t, uint64_t, const uint16_t*, const uint16_t*, int, uint16_t*, iris_cuda_stream,
                                char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_gemv_bf16_f32(const uint16_t*, uint64_t, uint64_t, const uint16_t*, const uint16_t*, int, float*, iris_cuda_stream,
                                    char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_attention_decode(const uint16_t*, const uint16_t*, const uint16_t*, const int64_t*, const uint16_t*, uint64_t,
                                       uint64_t, uint64_t, uint64_t, uint64_t, float, uint16_t*, iris_cuda_stream, char* msg,
                                       size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_attention_decode_rope(const uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                                            uint16_t*, const int64_t*, const uint16_t*, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                            float, uint16_t*, iris_cuda_stream, char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_gated_silu(const uint16_t*, const uint16_t*, uint64_t, uint64_t, uint64_t, uint64_t, uint16_t*, iris_cuda_stream,
                                 char* msg, size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

iris_status iris_cuda_residual_norm(const uint16_t*, const uint16_t*, uint64_t, uint64_t, uint64_t, const uint16_t*, uint64_t, const int32_t*,
                                    const uint16_t*, const uint16_t*, float, int, uint16_t*, uint16_t*, iris_cuda_stream, char* msg,
                                    size_t msg_size) {
  return fail(IRIS_ERR_NO_DEVICE, kNoCuda, msg, msg_size);
}

}  // extern "C"
