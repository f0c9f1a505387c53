// What the C API's opaque handles hold, and the helpers every entry point shares: status
// mapping, the message buffer, and the exception barrier (nothing may unwind into C).
#pragma once

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/iris_archive.h"
#include "iris/iris.h"

struct iris_archive {
  iris::IrisArchive archive;
};

namespace iris::capi {

iris_status to_status(ErrorKind kind);
iris_dtype to_c(DType d);
std::optional<DType> from_c(iris_dtype d);
iris_role to_c(Role r);
void fill_tensor_info(const TensorDesc& desc, size_t n_components, const char* name, iris_tensor_info* info);
void fill_component_info(const ComponentSpec& spec, iris_component_info* info);

// Writes `text` into the caller's buffer (truncated, always NUL-terminated).
inline void write_message(char* msg, size_t size, const std::string& text) {
  if (!msg || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(msg, text.data(), n);
  msg[n] = '\0';
}

inline iris_status report(const Status& s, char* msg, size_t size) {
  if (s.is_ok()) {
    write_message(msg, size, "");
    return IRIS_OK;
  }
  write_message(msg, size, s.message());
  return to_status(s.kind());
}

inline iris_status fail(iris_status code, const std::string& text, char* msg, size_t size) {
  write_message(msg, size, text);
  return code;
}

// Runs `body` (returning iris_status) and turns any escaping exception into a status.
template <typename F>
iris_status guarded(char* msg, size_t size, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(IRIS_ERR_OUT_OF_MEMORY, "out of host memory", msg, size);
  } catch (const std::exception& e) {
    return fail(IRIS_ERR_INTERNAL, std::string("internal error: ") + e.what(), msg, size);
  } catch (...) {
    return fail(IRIS_ERR_INTERNAL, "internal error: unknown exception", msg, size);
  }
}

}  // namespace iris::capi
