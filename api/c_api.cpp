// The C API of include/iris/iris.h over the library's C++ core (formats/, quant/).

#include "api/c_api_internal.h"
#include "common/hashing.h"
#include "common/parallel_for.h"
#include "formats/tensor_decode.h"
#include "iris/iris.h"

#ifndef IRIS_VERSION
#define IRIS_VERSION "0"
#endif

using namespace iris;
using namespace iris::capi;

namespace iris::capi {

iris_status to_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kAlreadyExists: return IRIS_ERR_INVALID_ARGUMENT;
    case ErrorKind::kInvalidInput: return IRIS_ERR_INVALID_INPUT;
    case ErrorKind::kCorrupt:
    case ErrorKind::kVerifyFailed: return IRIS_ERR_CORRUPT;
    case ErrorKind::kIo: return IRIS_ERR_IO;
    case ErrorKind::kNoDevice: return IRIS_ERR_NO_DEVICE;
    case ErrorKind::kDevice: return IRIS_ERR_DEVICE;
    case ErrorKind::kUnsupported: return IRIS_ERR_UNSUPPORTED;
    case ErrorKind::kInternal: return IRIS_ERR_INTERNAL;
  }
  return IRIS_ERR_INTERNAL;
}

namespace {
struct DTypePair {
  DType cpp;
  iris_dtype c;
};
constexpr DTypePair kDTypes[] = {
    {DType::kBool, IRIS_DTYPE_BOOL}, {DType::kU8, IRIS_DTYPE_U8},     {DType::kI8, IRIS_DTYPE_I8},
    {DType::kU16, IRIS_DTYPE_U16},   {DType::kI16, IRIS_DTYPE_I16},   {DType::kU32, IRIS_DTYPE_U32},
    {DType::kI32, IRIS_DTYPE_I32},   {DType::kU64, IRIS_DTYPE_U64},   {DType::kI64, IRIS_DTYPE_I64},
    {DType::kF16, IRIS_DTYPE_F16},   {DType::kBF16, IRIS_DTYPE_BF16}, {DType::kF32, IRIS_DTYPE_F32},
    {DType::kF64, IRIS_DTYPE_F64},   {DType::kF8_E4M3, IRIS_DTYPE_F8_E4M3}, {DType::kF8_E5M2, IRIS_DTYPE_F8_E5M2},
};
}  // namespace

iris_dtype to_c(DType d) {
  for (const auto& p : kDTypes)
    if (p.cpp == d) return p.c;
  return IRIS_DTYPE_OTHER;
}

std::optional<DType> from_c(iris_dtype d) {
  for (const auto& p : kDTypes)
    if (p.c == d) return p.cpp;
  return std::nullopt;
}

iris_role to_c(Role r) { return static_cast<iris_role>(static_cast<int>(r)); }

void fill_tensor_info(const TensorDesc& d, size_t n_components, const char* name, iris_tensor_info* info) {
  *info = iris_tensor_info{};
  info->name = name;
  info->ndim = uint32_t(d.shape.size());
  uint64_t numel = 1;
  for (size_t i = 0; i < d.shape.size() && i < IRIS_MAX_DIMS; ++i) {
    info->shape[i] = d.shape[i];
    numel *= d.shape[i];
  }
  info->numel = numel;
  info->dtype = to_c(d.dtype);
  info->format = static_cast<iris_format>(static_cast<int>(d.format));
  info->rows = row_view(d).rows;
  info->n_components = uint32_t(n_components);
  info->layout.kind = static_cast<iris_layout_kind>(static_cast<int>(d.layout.kind));
  if (d.layout.kind == LayoutKind::kTiled) {
    info->layout.tile_n = d.layout.tile_n;
    info->layout.tile_k = d.layout.tile_k;
    if (auto g = matrix_geometry(d); g.is_ok()) {
      info->layout.padded_n = g->padded_n;
      info->layout.padded_k = g->padded_k;
    }
  }
  iris_format_params& p = info->params;
  switch (d.format) {
    case Format::kMxfp4: p.block_size = 32; break;
    case Format::kNf4:
    case Format::kBnbFp4:
      if (auto b = bnb4_params(d); b.is_ok()) {  // validated when the archive was opened
        p.block_size = uint32_t(b->block_size);
        p.double_quant = b->double_quant;
        p.nested_block_size = uint32_t(b->nested_block_size);
        p.nested_offset = b->nested_offset;
        p.quant_state_bytes = b->quant_state_bytes;
      }
      break;
    case Format::kFp8E4M3:
      if (auto f = fp8_params(d); f.is_ok()) {
        p.granularity = static_cast<iris_scale_granularity>(static_cast<int>(f->granularity));
        p.scale_dtype = to_c(f->scale_dtype);
        p.block_n = f->block_n;
        p.block_k = f->block_k;
        p.group_size = f->group_size;
      }
      break;
    case Format::kIntGroup:
      if (auto g = int_group_params(d); g.is_ok()) {
        p.code_bits = g->bits;
        p.scale_dtype = to_c(g->scale_dtype);
        p.group_size = g->group_size;
        p.int_group_flags = (g->zero_points ? IRIS_INT_GROUP_ZERO_POINTS : 0u) | (g->act_order ? IRIS_INT_GROUP_ACT_ORDER : 0u);
        p.int_group_post_factor = g->post_factor;
      }
      break;
    case Format::kNvfp4:
      p.block_size = 16;
      if (auto v = nvfp4_params(d); v.is_ok())
        p.nvfp4_flags = (v->tensor_scale_divides ? IRIS_NVFP4_TENSOR_SCALE_DIVIDES : 0u) | (v->negative_zero ? IRIS_NVFP4_NEGATIVE_ZERO : 0u);
      break;
    case Format::kRaw: break;
  }
}

void fill_component_info(const ComponentSpec& spec, iris_component_info* info) {
  *info = iris_component_info{};
  info->role = to_c(spec.role);
  info->dtype = to_c(spec.dtype);
  info->ndim = uint32_t(spec.shape.size());
  for (size_t i = 0; i < spec.shape.size() && i < IRIS_MAX_DIMS; ++i) info->shape[i] = spec.shape[i];
  info->size = spec.bytes;
}

}  // namespace iris::capi

namespace {

Status check_archive(const iris_archive* a) {
  if (!a) return invalid_argument("archive handle is NULL");
  return Status::ok();
}

Result<const ArchiveTensor*> tensor_at(const iris_archive* a, uint64_t index) {
  IRIS_TRY(check_archive(a));
  const auto& ts = a->archive.manifest().tensors;
  if (index >= ts.size())
    return invalid_argument(a->archive.path() + ": tensor index " + std::to_string(index) + " out of range (" + std::to_string(ts.size()) + " tensors)");
  return &ts[index];
}

void fill_component(const iris_archive* a, const StoredComponent& c, iris_component_info* info) {
  fill_component_info(c.spec, info);
  info->file_offset = a->archive.absolute_offset(c);
  info->file = c.file;
  info->xxh3 = c.xxh3;
  info->data = a->archive.bytes(c).data();
}

}  // namespace

extern "C" {

uint32_t iris_abi_version(void) { return IRIS_ABI_VERSION; }

uint64_t iris_xxh3_64(const void* data, size_t size) { return xxh3_64(size ? data : "", size); }
const char* iris_version_string(void) { return IRIS_VERSION; }

const char* iris_status_name(iris_status s) {
  switch (s) {
    case IRIS_OK: return "IRIS_OK";
    case IRIS_ERR_INVALID_ARGUMENT: return "IRIS_ERR_INVALID_ARGUMENT";
    case IRIS_ERR_INVALID_INPUT: return "IRIS_ERR_INVALID_INPUT";
    case IRIS_ERR_CORRUPT: return "IRIS_ERR_CORRUPT";
    case IRIS_ERR_IO: return "IRIS_ERR_IO";
    case IRIS_ERR_UNSUPPORTED: return "IRIS_ERR_UNSUPPORTED";
    case IRIS_ERR_NOT_FOUND: return "IRIS_ERR_NOT_FOUND";
    case IRIS_ERR_BUFFER_TOO_SMALL: return "IRIS_ERR_BUFFER_TOO_SMALL";
    case IRIS_ERR_NO_DEVICE: return "IRIS_ERR_NO_DEVICE";
    case IRIS_ERR_DEVICE: return "IRIS_ERR_DEVICE";
    case IRIS_ERR_OUT_OF_MEMORY: return "IRIS_ERR_OUT_OF_MEMORY";
    case IRIS_ERR_INTERNAL: return "IRIS_ERR_INTERNAL";
    default: break;  // any other int (the enum spans them all)
  }
  return "IRIS_ERR_UNKNOWN";
}

const char* iris_dtype_name(iris_dtype d) {
  auto cpp = from_c(d);
  return cpp ? dtype_archive_name(*cpp).data() : "other";  // the names are NUL-terminated literals
}

uint32_t iris_dtype_bits(iris_dtype d) {
  auto cpp = from_c(d);
  return cpp ? dtype_bits(*cpp) : 0;
}

const char* iris_format_name(iris_format f) {
  if (int(f) < 0 || int(f) > int(IRIS_FORMAT_NVFP4)) return "unknown";
  return format_name(static_cast<Format>(int(f)));
}

const char* iris_role_name(iris_role r) {
  if (int(r) < 0 || int(r) >= kRoleCount) return "unknown";
  return role_name(static_cast<Role>(int(r)));
}

iris_status iris_archive_open(const char* path, uint32_t flags, iris_archive** out, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!out) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_open: out is NULL", msg, msg_size);
    *out = nullptr;
    if (!path) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_open: path is NULL", msg, msg_size);
    if (flags & ~IRIS_OPEN_VERIFY) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_open: unknown flags", msg, msg_size);
    auto a = IrisArchive::open(path);
    if (!a.is_ok()) return report(a.status(), msg, msg_size);
    auto handle = std::make_unique<iris_archive>(iris_archive{std::move(a).value()});
    if (flags & IRIS_OPEN_VERIFY) {
      iris_status s = iris_archive_verify(handle.get(), 0, msg, msg_size);
      if (s != IRIS_OK) return s;
    }
    *out = handle.release();
    write_message(msg, msg_size, "");
    return IRIS_OK;
  });
}

void iris_archive_close(iris_archive* a) { delete a; }

const char* iris_archive_path(const iris_archive* a) { return a ? a->archive.path().c_str() : ""; }
const char* iris_archive_model_type(const iris_archive* a) { return a ? a->archive.manifest().model_type.c_str() : ""; }

const char* iris_archive_manifest(const iris_archive* a, size_t* size) {
  if (!a) {
    if (size) *size = 0;
    return "";
  }
  const Preamble& p = a->archive.preamble();
  if (size) *size = p.manifest_size;
  return reinterpret_cast<const char*>(a->archive.mapping().data() + p.manifest_offset);
}

uint32_t iris_archive_data_file_count(const iris_archive* a) { return a ? uint32_t(a->archive.file_count()) : 0; }

const char* iris_archive_data_file_path(const iris_archive* a, uint32_t file) {
  if (!a || file >= a->archive.file_count()) return nullptr;
  return a->archive.file_path(file).c_str();
}

void iris_archive_format_version(const iris_archive* a, uint32_t* major, uint32_t* minor) {
  if (major) *major = a ? a->archive.preamble().version_major : 0;
  if (minor) *minor = a ? a->archive.preamble().version_minor : 0;
}

uint64_t iris_archive_tensor_count(const iris_archive* a) { return a ? a->archive.manifest().tensors.size() : 0; }

iris_status iris_archive_find_tensor(const iris_archive* a, const char* name, uint64_t* index, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!a || !name || !index) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_find_tensor: NULL argument", msg, msg_size);
    auto i = a->archive.index_of(name);
    if (!i) return fail(IRIS_ERR_NOT_FOUND, a->archive.path() + ": no tensor '" + name + "'", msg, msg_size);
    *index = *i;
    write_message(msg, msg_size, "");
    return IRIS_OK;
  });
}

iris_status iris_archive_tensor_info(const iris_archive* a, uint64_t index, iris_tensor_info* info, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!info) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_tensor_info: info is NULL", msg, msg_size);
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    fill_tensor_info((*t)->desc, (*t)->components.size(), (*t)->desc.name.c_str(), info);
    return report(Status::ok(), msg, msg_size);
  });
}

iris_status iris_archive_component(const iris_archive* a, uint64_t index, uint32_t component, iris_component_info* info,
                                   char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!info) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_component: info is NULL", msg, msg_size);
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    if (component >= (*t)->components.size())
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + (*t)->desc.name + "': component index " + std::to_string(component) + " out of range", msg, msg_size);
    fill_component(a, (*t)->components[component], info);
    return report(Status::ok(), msg, msg_size);
  });
}

iris_status iris_archive_find_component(const iris_archive* a, uint64_t index, iris_role role, iris_component_info* info,
                                        char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!info) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_find_component: info is NULL", msg, msg_size);
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    if (int(role) < 0 || int(role) >= kRoleCount) return fail(IRIS_ERR_INVALID_ARGUMENT, "unknown role", msg, msg_size);
    const StoredComponent* c = (*t)->component(static_cast<Role>(int(role)));
    if (!c)
      return fail(IRIS_ERR_NOT_FOUND, "tensor '" + (*t)->desc.name + "' has no component '" + role_name(static_cast<Role>(int(role))) + "'", msg, msg_size);
    fill_component(a, *c, info);
    return report(Status::ok(), msg, msg_size);
  });
}

uint64_t iris_archive_file_count(const iris_archive* a) { return a ? a->archive.manifest().files.size() : 0; }

const char* iris_archive_file_name(const iris_archive* a, uint64_t index) {
  if (!a || index >= a->archive.manifest().files.size()) return nullptr;
  return a->archive.manifest().files[index].name.c_str();
}

iris_status iris_archive_read_file(const iris_archive* a, const char* name, void* buffer, size_t buffer_size, size_t* size,
                                   char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (!a || !name || !size) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_archive_read_file: NULL argument", msg, msg_size);
    const StoredFile* f = nullptr;
    for (const auto& sf : a->archive.manifest().files)
      if (sf.name == name) f = &sf;
    if (!f) return fail(IRIS_ERR_NOT_FOUND, a->archive.path() + ": no embedded file '" + name + "'", msg, msg_size);
    *size = f->raw_size;
    if (!buffer) return report(Status::ok(), msg, msg_size);
    if (buffer_size < f->raw_size)
      return fail(IRIS_ERR_BUFFER_TOO_SMALL, a->archive.path() + ": embedded file '" + name + "' needs " + std::to_string(f->raw_size) + " bytes", msg, msg_size);
    auto text = a->archive.read_file(name);
    if (!text.is_ok()) return report(text.status(), msg, msg_size);
    std::memcpy(buffer, text->data(), text->size());
    return report(Status::ok(), msg, msg_size);
  });
}

iris_status iris_tensor_verify(const iris_archive* a, uint64_t index, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    return report(a->archive.verify_tensor(**t), msg, msg_size);
  });
}

iris_status iris_archive_verify(const iris_archive* a, int threads, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    if (Status s = check_archive(a); !s.is_ok()) return report(s, msg, msg_size);
    const auto& ts = a->archive.manifest().tensors;
    const int64_t n = int64_t(ts.size());
    // Tensors in parallel; the first failure in index order is reported.
    std::vector<Status> results(ts.size());
    ThreadLimit limit(threads);
    parallel_for_dynamic(n, [&](int64_t i) { results[size_t(i)] = a->archive.verify_tensor(ts[size_t(i)]); });
    for (const auto& s : results)
      if (!s.is_ok()) return report(s, msg, msg_size);
    for (const auto& f : a->archive.manifest().files) {
      Status s = a->archive.verify_file(f);
      if (!s.is_ok()) return report(s, msg, msg_size);
    }
    return report(Status::ok(), msg, msg_size);
  });
}

iris_status iris_dequantize_rows(const iris_archive* a, uint64_t index, uint64_t row_begin, uint64_t row_end, iris_dtype out_dtype,
                                 void* out, size_t out_size, int threads, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    const TensorDesc& d = (*t)->desc;
    auto to = from_c(out_dtype);
    if (!to || (*to != DType::kF32 && *to != DType::kF16 && *to != DType::kBF16))
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + d.name + "': output dtype must be IRIS_DTYPE_F32, F16 or BF16", msg, msg_size);
    const RowView v = row_view(d);
    if (row_begin > row_end || row_end > v.rows)
      return fail(IRIS_ERR_INVALID_ARGUMENT, "tensor '" + d.name + "': rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                                 ") outside [0, " + std::to_string(v.rows) + ")", msg, msg_size);
    const uint64_t need = (row_end - row_begin) * v.k * (dtype_bits(*to) / 8);
    if (out_size < need)
      return fail(IRIS_ERR_BUFFER_TOO_SMALL, "tensor '" + d.name + "': output needs " + std::to_string(need) + " bytes, got " + std::to_string(out_size), msg, msg_size);
    if (!out && need) return fail(IRIS_ERR_INVALID_ARGUMENT, "iris_dequantize_rows: out is NULL", msg, msg_size);
    ThreadLimit limit(threads);  // the codecs' loops (common/parallel_for.h): no thread outlives the call
    Status s = decode_rows(d, a->archive.component_bytes(**t), row_begin, row_end, *to, out);
    return report(s.with_context(s.is_ok() ? "" : a->archive.path() + ": "), msg, msg_size);
  });
}

iris_status iris_dequantize(const iris_archive* a, uint64_t index, iris_dtype out_dtype, void* out, size_t out_size, int threads,
                            char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> iris_status {
    auto t = tensor_at(a, index);
    if (!t.is_ok()) return report(t.status(), msg, msg_size);
    return iris_dequantize_rows(a, index, 0, row_view((*t)->desc).rows, out_dtype, out, out_size, threads, msg, msg_size);
  });
}

}  // extern "C"
