// The CUDA half of the C API (include/iris/iris_cuda.h) over kernels/: DeviceArchive for
// uploads and views, cuda_dequantize / cuda_gemv for the kernels.
#include <cuda_runtime.h>

#include <optional>
#include <string>
#include <vector>

#include "api/c_api_internal.h"
#include "iris/iris_cuda.h"
#include "kernels/decode_ops.h"
#include "kernels/device_archive.h"
#include "kernels/expert_set.h"
#include "kernels/kernels.h"

using namespace iris;
using namespace iris::capi;

struct iris_cuda_tensor {
  const DeviceArchive::Tensor* tensor;
  const DeviceArchive* owner;
  iris_tensor_info info;
};

struct iris_cuda_archive {
  DeviceArchive archive;
  std::vector<iris_cuda_tensor> tensors;
};

struct iris_cuda_uploader {
  Uploader uploader;
};

struct iris_cuda_experts {
  ExpertSet set;
  std::string name;  // of the first tensor, for messages
};

namespace {

const char* kNullTensor = "tensor handle is NULL";

// An expert set of the views add_views(tensor's view, views) appends for each tensor, in
// order: the argument and device checks both creators share. `fn` names the caller in messages.
template <typename AddViews>
iris_status create_experts(const char* fn, const iris_cuda_tensor* const* tensors, uint64_t count, iris_cuda_experts** out, char* msg,
                           size_t msg_size, AddViews add_views) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!out) return fail(IRIS_ERR_INVALID_ARGUMENT, std::string(fn) + ": out is NULL", msg, msg_size);
    *out = nullptr;
    if (!tensors || count == 0) return fail(IRIS_ERR_INVALID_ARGUMENT, std::string(fn) + ": no tensors", msg, msg_size);
    std::vector<QuantView> views;
    int ordinal = -1;
    for (uint64_t i = 0; i < count; ++i) {
      const iris_cuda_tensor* t = tensors[i];
      if (!t) return fail(IRIS_ERR_INVALID_ARGUMENT, std::string(fn) + ": tensors[" + std::to_string(i) + "] is NULL", msg, msg_size);
      if (!t->tensor->view.is_ok()) return report(t->tensor->view.status(), msg, msg_size);
      const int device = t->owner->device().ordinal;
      if (ordinal >= 0 && device != ordinal)
        return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + t->tensor->desc.name + "' is on another device than the first expert", msg, msg_size);
      ordinal = device;
      if (t->owner->nf4_bf16_table() != tensors[0]->owner->nf4_bf16_table())
        return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + t->tensor->desc.name + "' comes from an upload with another nf4_table than the first expert's", msg, msg_size);
      Status s = add_views(*t->tensor->view, views);
      if (!s.is_ok()) return report(s.with_context("tensor '" + t->tensor->desc.name + "': "), msg, msg_size);
    }
    auto set = ExpertSet::create(views, ordinal, tensors[0]->owner->launch_config());
    if (!set.is_ok()) return report(set.status().with_context("tensor '" + tensors[0]->tensor->desc.name + "': "), msg, msg_size);
    *out = new iris_cuda_experts{std::move(set).value(), tensors[0]->tensor->desc.name};
    return report(Status::ok(), msg, msg_size);
  });
}

StagingOptions staging_options(const iris_upload_options* o) {
  StagingOptions so;
  if (!o) return so;
  so.device = o->device;
  if (o->staging_bytes) so.buffer_bytes = o->staging_bytes;
  if (o->staging_buffers) so.buffers = o->staging_buffers;
  so.threads = o->threads;
  return so;
}

iris_status upload_with(Uploader& uploader, const iris_archive* a, const iris_upload_options* o, iris_cuda_archive** out, char* msg,
                        size_t msg_size) {
  std::vector<std::string> names;
  if (o && o->names) {
    for (uint64_t i = 0; i < o->n_names; ++i) {
      if (!o->names[i]) return fail(IRIS_ERR_INVALID_ARGUMENT, "upload: names[" + std::to_string(i) + "] is NULL", msg, msg_size);
      names.emplace_back(o->names[i]);
    }
    if (names.empty()) return fail(IRIS_ERR_INVALID_ARGUMENT, "upload: names given but n_names is 0", msg, msg_size);
  }
  const uint32_t nf4_table = o ? o->nf4_table : IRIS_NF4_TABLE_EXACT;
  if (nf4_table != IRIS_NF4_TABLE_EXACT && nf4_table != IRIS_NF4_TABLE_BF16)
    return fail(IRIS_ERR_INVALID_ARGUMENT, "upload: nf4_table must be IRIS_NF4_TABLE_EXACT or IRIS_NF4_TABLE_BF16, not " + std::to_string(nf4_table), msg, msg_size);
  auto dev = uploader.upload(a->archive, names, o && o->verify != 0);
  if (!dev.is_ok()) return report(dev.status(), msg, msg_size);
  auto handle = std::make_unique<iris_cuda_archive>(iris_cuda_archive{std::move(dev).value(), {}});
  if (Status s = handle->archive.set_nf4_bf16_table(nf4_table == IRIS_NF4_TABLE_BF16); !s.is_ok()) return report(s, msg, msg_size);
  handle->tensors.reserve(handle->archive.tensors().size());
  for (const auto& t : handle->archive.tensors()) {
    iris_cuda_tensor ct{&t, &handle->archive, {}};
    fill_tensor_info(t.desc, t.specs.size(), t.desc.name.c_str(), &ct.info);
    handle->tensors.push_back(ct);
  }
  *out = handle.release();
  return report(Status::ok(), msg, msg_size);
}

// iris_cuda_gemv, or with `matrix` iris_cuda_gemv_matrix: the arguments checked, the view
// chosen (the whole tensor, or one matrix of its stack), one launch.
iris_status run_gemv(const char* call, const iris_cuda_tensor* t, std::optional<uint64_t> matrix, const uint16_t* x, int batch, void* y,
                     iris_dtype y_dtype, iris_cuda_stream stream, char* msg, size_t msg_size) {
  if (!t) return fail(IRIS_ERR_INVALID_ARGUMENT, kNullTensor, msg, msg_size);
  const std::string& name = t->tensor->desc.name;
  if (!t->tensor->view.is_ok()) return report(t->tensor->view.status(), msg, msg_size);
  if (batch < 1 || batch > 16) return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + name + "': batch must be 1..16", msg, msg_size);
  if (y_dtype != IRIS_DTYPE_F32 && y_dtype != IRIS_DTYPE_BF16)
    return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + name + "': GEMV output must be IRIS_DTYPE_F32 or BF16", msg, msg_size);
  Result<QuantView> v = *t->tensor->view;
  if (matrix) v = matrix_view(*t->tensor->view, *matrix);
  if (!v.is_ok()) return report(v.status().with_context("tensor '" + name + "': "), msg, msg_size);
  if (v->rows && v->k && !x) return fail(IRIS_ERR_INVALID_ARGUMENT, std::string(call) + ": x is NULL", msg, msg_size);
  if (v->rows && !y) return fail(IRIS_ERR_INVALID_ARGUMENT, std::string(call) + ": y is NULL", msg, msg_size);
  Status s = cuda_gemv(*v, x, batch, y, *from_c(y_dtype), stream, t->owner->launch_config());
  return report(s.with_context(s.is_ok() ? "" : "tensor '" + name + "': "), msg, msg_size);
}

}  // namespace

extern "C" {

int iris_has_cuda(void) { return 1; }

iris_status iris_cuda_device_check(int device, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status { return report(query_device(device).status(), msg, msg_size); });
}

// nf4_table and reserved32 took the place of reserved[0]: the struct's size and every older
// field's offset are those of ABI 1's first release.
static_assert(sizeof(void*) != 8 || sizeof(iris_upload_options) == 80, "iris_upload_options changed size: an ABI break");

void iris_upload_options_init(iris_upload_options* o) {
  if (!o) return;
  *o = iris_upload_options{};
  const StagingOptions defaults;
  o->staging_bytes = defaults.buffer_bytes;
  o->staging_buffers = defaults.buffers;
}

iris_status iris_cuda_uploader_create(const iris_upload_options* options, iris_cuda_uploader** out, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!out) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_uploader_create: out is NULL", msg, msg_size);
    *out = nullptr;
    auto u = Uploader::create(staging_options(options));
    if (!u.is_ok()) return report(u.status(), msg, msg_size);
    *out = new iris_cuda_uploader{std::move(u).value()};
    return report(Status::ok(), msg, msg_size);
  });
}

void iris_cuda_uploader_free(iris_cuda_uploader* u) { delete u; }

iris_status iris_cuda_uploader_upload(iris_cuda_uploader* u, const iris_archive* a, const iris_upload_options* options,
                                      iris_cuda_archive** out, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!out) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_uploader_upload: out is NULL", msg, msg_size);
    *out = nullptr;
    if (!u || !a) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_uploader_upload: NULL uploader or archive", msg, msg_size);
    return upload_with(u->uploader, a, options, out, msg, msg_size);
  });
}

iris_status iris_cuda_upload(const iris_archive* a, const iris_upload_options* options, iris_cuda_archive** out, char* msg,
                             size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!out) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_upload: out is NULL", msg, msg_size);
    *out = nullptr;
    if (!a) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_upload: archive is NULL", msg, msg_size);
    auto uploader = Uploader::create(staging_options(options));
    if (!uploader.is_ok()) return report(uploader.status(), msg, msg_size);
    return upload_with(*uploader, a, options, out, msg, msg_size);
  });
}

void iris_cuda_archive_free(iris_cuda_archive* a) { delete a; }

uint64_t iris_cuda_archive_device_bytes(const iris_cuda_archive* a) { return a ? a->archive.device_bytes() : 0; }
double iris_cuda_archive_upload_seconds(const iris_cuda_archive* a) { return a ? a->archive.upload_seconds() : 0; }
uint64_t iris_cuda_archive_tensor_count(const iris_cuda_archive* a) { return a ? a->tensors.size() : 0; }

iris_status iris_cuda_archive_tensor(const iris_cuda_archive* a, uint64_t index, const iris_cuda_tensor** tensor, char* msg,
                                     size_t msg_size) {
  if (!a || !tensor) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_archive_tensor: NULL argument", msg, msg_size);
  if (index >= a->tensors.size())
    return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor index " + std::to_string(index) + " out of range (" + std::to_string(a->tensors.size()) + " uploaded)", msg, msg_size);
  *tensor = &a->tensors[index];
  return report(Status::ok(), msg, msg_size);
}

iris_status iris_cuda_archive_find_tensor(const iris_cuda_archive* a, const char* name, const iris_cuda_tensor** tensor, char* msg,
                                          size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!a || !name || !tensor) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_archive_find_tensor: NULL argument", msg, msg_size);
    const DeviceArchive::Tensor* t = a->archive.find(name);
    if (!t) return fail(IRIS_ERR_NOT_FOUND, std::string("no uploaded tensor '") + name + "'", msg, msg_size);
    *tensor = &a->tensors[size_t(t - a->archive.tensors().data())];
    return report(Status::ok(), msg, msg_size);
  });
}

void iris_cuda_tensor_info(const iris_cuda_tensor* t, iris_tensor_info* info) {
  if (t && info) *info = t->info;
}

const void* iris_cuda_tensor_component(const iris_cuda_tensor* t, iris_role role) {
  if (!t || int(role) < 0 || int(role) >= kRoleCount) return nullptr;
  return t->tensor->pointers[size_t(role)];
}

iris_status iris_cuda_dequantize(const iris_cuda_tensor* t, iris_dtype out_dtype, void* out, size_t out_size, iris_cuda_stream stream,
                                 char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!t) return fail(IRIS_ERR_INVALID_ARGUMENT, kNullTensor, msg, msg_size);
    const std::string& name = t->tensor->desc.name;
    if (!t->tensor->view.is_ok()) return report(t->tensor->view.status(), msg, msg_size);
    auto to = from_c(out_dtype);
    if (!to || (*to != DType::kF32 && *to != DType::kF16 && *to != DType::kBF16))
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + name + "': output dtype must be IRIS_DTYPE_F32, F16 or BF16", msg, msg_size);
    const QuantView& v = *t->tensor->view;
    const uint64_t need = v.rows * v.k * (dtype_bits(*to) / 8);
    if (out_size < need)
      return fail(IRIS_ERR_BUFFER_TOO_SMALL, "tensor '" + name + "': output needs " + std::to_string(need) + " bytes, got " + std::to_string(out_size), msg, msg_size);
    if (!out && need) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_dequantize: out is NULL", msg, msg_size);
    Status s = cuda_dequantize(v, out, *to, stream, t->owner->launch_config());
    return report(s.with_context(s.is_ok() ? "" : "tensor '" + name + "': "), msg, msg_size);
  });
}

iris_status iris_cuda_gemv(const iris_cuda_tensor* t, const uint16_t* x, int batch, void* y, iris_dtype y_dtype, iris_cuda_stream stream,
                           char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&] { return run_gemv("iris_cuda_gemv", t, std::nullopt, x, batch, y, y_dtype, stream, msg, msg_size); });
}

iris_status iris_cuda_gemv_matrix(const iris_cuda_tensor* t, uint64_t matrix, const uint16_t* x, int batch, void* y, iris_dtype y_dtype,
                                  iris_cuda_stream stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&] { return run_gemv("iris_cuda_gemv_matrix", t, matrix, x, batch, y, y_dtype, stream, msg, msg_size); });
}

iris_status iris_cuda_experts_create(const iris_cuda_tensor* const* tensors, uint64_t count, iris_cuda_experts** out, char* msg,
                                     size_t msg_size) {
  return create_experts("iris_cuda_experts_create", tensors, count, out, msg, msg_size, [](const QuantView& v, std::vector<QuantView>& views) {
    views.push_back(v);
    return Status::ok();
  });
}

iris_status iris_cuda_experts_create_rows(const iris_cuda_tensor* const* tensors, uint64_t count, uint64_t rows, iris_cuda_experts** out,
                                          char* msg, size_t msg_size) {
  return create_experts("iris_cuda_experts_create_rows", tensors, count, out, msg, msg_size,
                        [rows](const QuantView& v, std::vector<QuantView>& views) -> Status {
                          IRIS_ASSIGN_OR_RETURN(QuantView blocks, row_blocks_view(v, rows));
                          for (uint64_t m = 0; m < blocks.rows / rows; ++m) {
                            IRIS_ASSIGN_OR_RETURN(QuantView one, matrix_view(blocks, m));
                            views.push_back(one);
                          }
                          return Status::ok();
                        });
}

void iris_cuda_experts_free(iris_cuda_experts* experts) { delete experts; }
uint64_t iris_cuda_experts_count(const iris_cuda_experts* e) { return e ? e->set.count() : 0; }
uint64_t iris_cuda_experts_n(const iris_cuda_experts* e) { return e ? e->set.geometry().n : 0; }
uint64_t iris_cuda_experts_k(const iris_cuda_experts* e) { return e ? e->set.geometry().k : 0; }
int iris_cuda_experts_use_tensor_cores(const iris_cuda_experts* e) { return e && e->set.uses_tensor_cores() ? 1 : 0; }

iris_status iris_cuda_gemv_experts(const iris_cuda_experts* e, const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs,
                                   const uint16_t* x, uint64_t x_count, void* y, iris_dtype y_dtype, iris_cuda_stream stream, char* msg,
                                   size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!e) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_gemv_experts: experts is NULL", msg, msg_size);
    if (y_dtype != IRIS_DTYPE_F32 && y_dtype != IRIS_DTYPE_BF16)
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + e->name + "': GEMV output must be IRIS_DTYPE_F32 or BF16", msg, msg_size);
    Status s = e->set.gemv(expert_ids, x_rows, pairs, x, x_count, y, *from_c(y_dtype), stream);
    return report(s.with_context(s.is_ok() ? "" : "tensor '" + e->name + "': "), msg, msg_size);
  });
}

iris_status iris_cuda_gemv_experts_swiglu(const iris_cuda_experts* e, const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs,
                                          const uint16_t* x, uint64_t x_count, const uint16_t* bias, float alpha, float limit, uint16_t* y,
                                          iris_cuda_stream stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!e) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_gemv_experts_swiglu: experts is NULL", msg, msg_size);
    Status s = e->set.gemv_swiglu(expert_ids, x_rows, pairs, x, x_count, bias, alpha, limit, y, stream);
    return report(s.with_context(s.is_ok() ? "" : "tensor '" + e->name + "': "), msg, msg_size);
  });
}

iris_status iris_cuda_gemv_experts_gated(const iris_cuda_experts* e, const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs,
                                         const uint16_t* x, uint64_t x_count, uint32_t* exchange, uint16_t* out, iris_cuda_stream stream,
                                         char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!e) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_gemv_experts_gated: experts is NULL", msg, msg_size);
    Status s = e->set.gemv_gated(expert_ids, x_rows, pairs, x, x_count, exchange, out, stream);
    return report(s.with_context(s.is_ok() ? "" : "tensor '" + e->name + "': "), msg, msg_size);
  });
}

uint64_t iris_cuda_experts_gated_exchange(const iris_cuda_experts* e, uint64_t pairs) { return e ? e->set.gated_exchange(pairs) : 0; }

uint64_t iris_cuda_experts_dequantize_workspace(const iris_cuda_experts* e, uint64_t pairs) {
  return e ? e->set.dequantize_workspace(pairs) : 0;
}

iris_status iris_cuda_experts_dequantize(const iris_cuda_experts* e, const int32_t* expert_ids, uint64_t pairs, void* workspace,
                                         size_t workspace_size, iris_dtype out_dtype, void* out, size_t out_size, iris_cuda_stream stream,
                                         char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!e) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_experts_dequantize: experts is NULL", msg, msg_size);
    if (Status s = e->set.dequantize_support(); !s.is_ok())  // said before any buffer is sized
      return report(s.with_context("tensor '" + e->name + "': "), msg, msg_size);
    auto to = from_c(out_dtype);
    if (!to || (*to != DType::kF32 && *to != DType::kF16 && *to != DType::kBF16))
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + e->name + "': output dtype must be IRIS_DTYPE_F32, F16 or BF16", msg, msg_size);
    const QuantView& g = e->set.geometry();
    const uint64_t need = pairs * g.n * g.k * (dtype_bits(*to) / 8), ws_need = e->set.dequantize_workspace(pairs);
    if (out_size < need)
      return fail(IRIS_ERR_BUFFER_TOO_SMALL, "tensor '" + e->name + "': output needs " + std::to_string(need) + " bytes, got " + std::to_string(out_size), msg, msg_size);
    if (workspace_size < ws_need)
      return fail(IRIS_ERR_BUFFER_TOO_SMALL, "tensor '" + e->name + "': workspace needs " + std::to_string(ws_need) + " bytes, got " + std::to_string(workspace_size), msg, msg_size);
    Status s = e->set.dequantize(expert_ids, pairs, workspace, out, *to, stream);
    return report(s.with_context(s.is_ok() ? "" : "tensor '" + e->name + "': "), msg, msg_size);
  });
}

int iris_cuda_experts_gated_in_launch(const iris_cuda_experts* e) {
  if (!e) return 0;
  try {
    Result<bool> r = e->set.gated_in_launch();
    return r.is_ok() && r.value() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

iris_status iris_cuda_moe_route(const uint16_t* x, uint64_t rows, const uint16_t* w, const uint16_t* bias, uint64_t experts, uint64_t k,
                                uint64_t top_k, uint16_t* logits, uint16_t* weights, int32_t* ids, uint32_t* workspace,
                                iris_cuda_stream stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (rows > UINT32_MAX || experts > UINT32_MAX || k > UINT32_MAX || top_k > UINT32_MAX)
      return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_moe_route: a size over 2^32", msg, msg_size);
    MoeRouteArgs a;
    a.x = x, a.w = w, a.bias = bias, a.rows = uint32_t(rows), a.experts = uint32_t(experts), a.k = uint32_t(k);
    a.top_k = uint32_t(top_k), a.logits = logits, a.weights = weights, a.ids = ids, a.workspace = workspace;
    return report(cuda_moe_route(a, stream).with_context("iris_cuda_moe_route: "), msg, msg_size);
  });
}

namespace {

// Both dense GEMV entry points: y16 (BF16) or y32 (the FP32 sums), the other null.
iris_status dense_gemv_entry(const char* fn, const uint16_t* w, uint64_t n, uint64_t k, const uint16_t* bias, const uint16_t* x, int batch,
                             uint16_t* y16, float* y32, iris_cuda_stream stream, char* msg, size_t msg_size) {
  const std::string name = fn;
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (n > UINT32_MAX || k > UINT32_MAX || batch < 0)
      return fail(IRIS_ERR_INVALID_ARGUMENT, name + ": n or k over 2^32, or a negative batch", msg, msg_size);
    if (!y16 && !y32) return fail(IRIS_ERR_INVALID_ARGUMENT, name + ": y must not be NULL", msg, msg_size);
    DenseGemvArgs a;
    a.w = w, a.bias = bias, a.x = x, a.n = uint32_t(n), a.k = uint32_t(k), a.batch = uint32_t(batch), a.y = y16, a.y_f32 = y32;
    return report(cuda_dense_gemv(a, stream).with_context(name + ": "), msg, msg_size);
  });
}

}  // namespace

iris_status iris_cuda_gemv_bf16(const uint16_t* w, uint64_t n, uint64_t k, const uint16_t* bias, const uint16_t* x, int batch, uint16_t* y,
                                iris_cuda_stream stream, char* msg, size_t msg_size) {
  return dense_gemv_entry("iris_cuda_gemv_bf16", w, n, k, bias, x, batch, y, nullptr, stream, msg, msg_size);
}

iris_status iris_cuda_gemv_bf16_f32(const uint16_t* w, uint64_t n, uint64_t k, const uint16_t* bias, const uint16_t* x, int batch, float* y,
                                    iris_cuda_stream stream, char* msg, size_t msg_size) {
  return dense_gemv_entry("iris_cuda_gemv_bf16_f32", w, n, k, bias, x, batch, nullptr, y, stream, msg, msg_size);
}

namespace {

// What both attention entry points fill alike; false when a size does not fit the kernel's 32 bits.
bool attention_args(AttentionDecodeArgs& a, const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, const int64_t* pos,
                    const uint16_t* sinks, uint64_t heads, uint64_t kv_heads, uint64_t head_dim, uint64_t max_len, uint64_t window,
                    float scale, uint16_t* out) {
  if (heads > UINT32_MAX || kv_heads > UINT32_MAX || head_dim > UINT32_MAX || max_len > UINT32_MAX || window > UINT32_MAX) return false;
  a.q = q, a.k_cache = k_cache, a.v_cache = v_cache, a.pos = pos, a.sinks = sinks, a.heads = uint32_t(heads);
  a.kv_heads = uint32_t(kv_heads), a.head_dim = uint32_t(head_dim), a.max_len = uint32_t(max_len), a.window = uint32_t(window);
  a.scale = scale, a.out = out;
  return true;
}

}  // namespace

iris_status iris_cuda_attention_decode(const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, const int64_t* pos,
                                       const uint16_t* sinks, uint64_t heads, uint64_t kv_heads, uint64_t head_dim, uint64_t max_len,
                                       uint64_t window, float scale, uint16_t* out, iris_cuda_stream stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    AttentionDecodeArgs a;
    if (!attention_args(a, q, k_cache, v_cache, pos, sinks, heads, kv_heads, head_dim, max_len, window, scale, out))
      return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_attention_decode: a size over 2^32", msg, msg_size);
    return report(cuda_attention_decode(a, stream).with_context("iris_cuda_attention_decode: "), msg, msg_size);
  });
}

iris_status iris_cuda_attention_decode_rope(const uint16_t* q, const uint16_t* k_new, const uint16_t* v_new, const uint16_t* cos,
                                            const uint16_t* sin, uint16_t* k_cache, uint16_t* v_cache, const int64_t* pos,
                                            const uint16_t* sinks, uint64_t heads, uint64_t kv_heads, uint64_t head_dim, uint64_t max_len,
                                            uint64_t window, float scale, uint16_t* out, iris_cuda_stream stream, char* msg,
                                            size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    AttentionDecodeArgs a;
    if (!attention_args(a, q, k_cache, v_cache, pos, sinks, heads, kv_heads, head_dim, max_len, window, scale, out))
      return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_attention_decode_rope: a size over 2^32", msg, msg_size);
    a.cos = cos, a.sin = sin, a.k_new = k_new, a.v_new = v_new;
    return report(cuda_attention_decode(a, stream).with_context("iris_cuda_attention_decode_rope: "), msg, msg_size);
  });
}

iris_status iris_cuda_gated_silu(const uint16_t* gate, const uint16_t* up, uint64_t rows, uint64_t n, uint64_t gate_stride, uint64_t up_stride,
                                 uint16_t* out, iris_cuda_stream stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    GatedSiluArgs a;
    a.gate = gate, a.up = up, a.rows = rows, a.n = n, a.gate_stride = gate_stride, a.up_stride = up_stride, a.out = out;
    return report(cuda_gated_silu(a, stream).with_context("iris_cuda_gated_silu: "), msg, msg_size);
  });
}

iris_status iris_cuda_residual_norm(const uint16_t* x, const uint16_t* y, uint64_t rows, uint64_t terms, uint64_t n, const uint16_t* bias,
                                    uint64_t bias_rows, const int32_t* ids, const uint16_t* weights, const uint16_t* norm_w, float eps,
                                    int weight_in_f32, uint16_t* x_out, uint16_t* h_out, iris_cuda_stream stream, char* msg,
                                    size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (rows > UINT32_MAX || terms > UINT32_MAX || n > UINT32_MAX || bias_rows > UINT32_MAX)
      return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_cuda_residual_norm: a size over 2^32", msg, msg_size);
    ResidualNormArgs a;
    a.x = x, a.y = y, a.rows = uint32_t(rows), a.terms = uint32_t(terms), a.n = uint32_t(n), a.bias = bias;
    a.bias_rows = uint32_t(bias_rows), a.ids = ids, a.weights = weights, a.norm_w = norm_w, a.eps = eps;
    a.weight_in_f32 = weight_in_f32 != 0, a.x_out = x_out, a.h_out = h_out;
    return report(cuda_residual_norm(a, stream).with_context("iris_cuda_residual_norm: "), msg, msg_size);
  });
}

int iris_cuda_gemv_uses_tensor_cores(const iris_cuda_tensor* t, int batch) {
  if (!t || !t->tensor->view.is_ok()) return 0;
  return cuda_gemv_uses_tensor_cores(*t->tensor->view, batch, t->owner->launch_config()) ? 1 : 0;
}

}  // extern "C"
