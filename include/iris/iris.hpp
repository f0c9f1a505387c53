// iris: a header-only C++17 wrapper of the C API (iris.h, iris_cuda.h): RAII handles, spans
// as pointer + size, and errors as iris::Error exceptions carrying the status and message.
// Everything here is inline over the C ABI, so it adds nothing to the library's ABI.
#ifndef IRIS_IRIS_HPP_
#define IRIS_IRIS_HPP_

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iris/iris.h"
#include "iris/iris_cuda.h"

namespace iris {

class Error : public std::runtime_error {
 public:
  Error(iris_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  iris_status status() const noexcept { return status_; }

 private:
  iris_status status_;
};

namespace detail {
// Calls `f(msg, size)` and throws on an error status.
template <typename F>
inline void check(F&& f) {
  char msg[1024];
  const iris_status s = f(msg, sizeof msg);
  if (s != IRIS_OK) throw Error(s, std::string(iris_status_name(s)) + ": " + msg);
}
}  // namespace detail

// A read-only byte range inside the archive mapping (valid while its Archive lives).
struct Bytes {
  const void* data = nullptr;
  std::size_t size = 0;
};

class Archive {
 public:
  explicit Archive(const std::string& path, uint32_t flags = 0) {
    detail::check([&](char* m, size_t n) { return iris_archive_open(path.c_str(), flags, &a_, m, n); });
  }
  Archive(Archive&& o) noexcept : a_(std::exchange(o.a_, nullptr)) {}
  Archive& operator=(Archive&& o) noexcept {
    if (this != &o) {
      iris_archive_close(a_);
      a_ = std::exchange(o.a_, nullptr);
    }
    return *this;
  }
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;
  ~Archive() { iris_archive_close(a_); }

  const iris_archive* get() const noexcept { return a_; }
  std::string_view model_type() const { return iris_archive_model_type(a_); }
  std::string_view manifest() const {
    size_t n = 0;
    const char* p = iris_archive_manifest(a_, &n);
    return {p, n};
  }
  uint64_t tensor_count() const { return iris_archive_tensor_count(a_); }
  // The files the archive is made of: 1, or an archive set's index and its members
  // (iris_component_info::file indexes them).
  uint32_t data_file_count() const { return iris_archive_data_file_count(a_); }
  std::string_view data_file_path(uint32_t file) const {
    const char* p = iris_archive_data_file_path(a_, file);
    return p ? std::string_view(p) : std::string_view();
  }

  // The index of `name`, or -1 when there is none.
  int64_t find(const std::string& name) const {
    uint64_t i = 0;
    return iris_archive_find_tensor(a_, name.c_str(), &i, nullptr, 0) == IRIS_OK ? int64_t(i) : -1;
  }
  iris_tensor_info info(uint64_t index) const {
    iris_tensor_info t;
    detail::check([&](char* m, size_t n) { return iris_archive_tensor_info(a_, index, &t, m, n); });
    return t;
  }
  iris_component_info component(uint64_t index, iris_role role) const {
    iris_component_info c;
    detail::check([&](char* m, size_t n) { return iris_archive_find_component(a_, index, role, &c, m, n); });
    return c;
  }
  std::string file(const std::string& name) const {
    size_t size = 0;
    detail::check([&](char* m, size_t n) { return iris_archive_read_file(a_, name.c_str(), nullptr, 0, &size, m, n); });
    std::string out(size, '\0');
    detail::check([&](char* m, size_t n) { return iris_archive_read_file(a_, name.c_str(), out.data(), out.size(), &size, m, n); });
    return out;
  }
  void verify(int threads = 0) const {
    detail::check([&](char* m, size_t n) { return iris_archive_verify(a_, threads, m, n); });
  }
  // Rows [row_begin, row_end) of tensor `index` as T (float for F32, uint16_t for BF16/F16).
  template <typename T>
  std::vector<T> dequantize(uint64_t index, iris_dtype dtype, uint64_t row_begin, uint64_t row_end, int threads = 0) const {
    const iris_tensor_info t = info(index);
    const uint64_t k = t.rows ? t.numel / t.rows : 0;
    std::vector<T> out((row_end - row_begin) * k);
    detail::check([&](char* m, size_t n) {
      return iris_dequantize_rows(a_, index, row_begin, row_end, dtype, out.data(), out.size() * sizeof(T), threads, m, n);
    });
    return out;
  }
  std::vector<float> dequantize_f32(uint64_t index, int threads = 0) const {
    return dequantize<float>(index, IRIS_DTYPE_F32, 0, info(index).rows, threads);
  }

 private:
  iris_archive* a_ = nullptr;
};

// An archive (or part of it) on a GPU; see iris_cuda.h.
class CudaArchive {
 public:
  CudaArchive(const Archive& archive, const iris_upload_options* options = nullptr) {
    detail::check([&](char* m, size_t n) { return iris_cuda_upload(archive.get(), options, &a_, m, n); });
  }
  CudaArchive(CudaArchive&& o) noexcept : a_(std::exchange(o.a_, nullptr)) {}
  CudaArchive& operator=(CudaArchive&& o) noexcept {
    if (this != &o) {
      iris_cuda_archive_free(a_);
      a_ = std::exchange(o.a_, nullptr);
    }
    return *this;
  }
  CudaArchive(const CudaArchive&) = delete;
  CudaArchive& operator=(const CudaArchive&) = delete;
  ~CudaArchive() { iris_cuda_archive_free(a_); }

  const iris_cuda_archive* get() const noexcept { return a_; }
  uint64_t device_bytes() const { return iris_cuda_archive_device_bytes(a_); }
  double upload_seconds() const { return iris_cuda_archive_upload_seconds(a_); }
  const iris_cuda_tensor* tensor(const std::string& name) const {
    const iris_cuda_tensor* t = nullptr;
    detail::check([&](char* m, size_t n) { return iris_cuda_archive_find_tensor(a_, name.c_str(), &t, m, n); });
    return t;
  }
  static void dequantize(const iris_cuda_tensor* t, iris_dtype dtype, void* out, size_t out_size, iris_cuda_stream stream = nullptr) {
    detail::check([&](char* m, size_t n) { return iris_cuda_dequantize(t, dtype, out, out_size, stream, m, n); });
  }
  static void gemv(const iris_cuda_tensor* t, const uint16_t* x, int batch, void* y, iris_dtype y_dtype, iris_cuda_stream stream = nullptr) {
    detail::check([&](char* m, size_t n) { return iris_cuda_gemv(t, x, batch, y, y_dtype, stream, m, n); });
  }

 private:
  iris_cuda_archive* a_ = nullptr;
};

}  // namespace iris

#endif  // IRIS_IRIS_HPP_
