// Status and Result<T>: errors as values, in the LevelDB style.
//
// Every failure carries a Kind (which maps to a documented process exit code) and one line
// of text that names the file, the tensor and what is wrong. Nothing in the library throws
// for bad input; exceptions are reserved for programming errors and std::bad_alloc.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace iris {

// What went wrong, by meaning. The command line maps kinds to its documented exit codes
// (converter/cli/exit_codes.h) and the C API to iris_status; the library knows neither.
enum class ErrorKind {
  kInvalidArgument,  // the caller asked for something impossible (bad option value, bad index)
  kAlreadyExists,    // an output that must not be replaced exists
  kInvalidInput,     // malformed or inconsistent source or archive
  kCorrupt,          // a checksum does not match: the bytes were damaged
  kVerifyFailed,     // the archive is well-formed but a comparison failed
  kIo,               // the OS refused a read, a write, a rename...
  kNoDevice,         // no usable GPU, or a build without CUDA
  kDevice,           // the CUDA runtime reported an error
  kUnsupported,      // valid input this version does not handle (yet)
  kInternal,         // a bug: an invariant of our own code broke
};

const char* error_kind_name(ErrorKind kind);

class Status {
 public:
  Status() = default;  // OK
  static Status ok() { return Status(); }
  static Status error(ErrorKind kind, std::string message) { return Status(kind, std::move(message)); }

  bool is_ok() const { return !kind_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  ErrorKind kind() const { return kind_.value_or(ErrorKind::kInternal); }
  const std::string& message() const { return message_; }

  // Prefixes context ("file.safetensors: ") to the message of an error; no-op on OK.
  Status with_context(const std::string& prefix) const {
    if (is_ok()) return *this;
    return Status(*kind_, prefix + message_);
  }

 private:
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  std::optional<ErrorKind> kind_;
  std::string message_;
};

inline Status invalid_input(std::string m) { return Status::error(ErrorKind::kInvalidInput, std::move(m)); }
inline Status io_error(std::string m) { return Status::error(ErrorKind::kIo, std::move(m)); }
inline Status invalid_argument(std::string m) { return Status::error(ErrorKind::kInvalidArgument, std::move(m)); }
inline Status usage_error(std::string m) { return invalid_argument(std::move(m)); }  // the command line's name for it
inline Status already_exists(std::string m) { return Status::error(ErrorKind::kAlreadyExists, std::move(m)); }
inline Status corrupt_data(std::string m) { return Status::error(ErrorKind::kCorrupt, std::move(m)); }
inline Status unsupported(std::string m) { return Status::error(ErrorKind::kUnsupported, std::move(m)); }
inline Status verify_failed(std::string m) { return Status::error(ErrorKind::kVerifyFailed, std::move(m)); }
inline Status internal_error(std::string m) { return Status::error(ErrorKind::kInternal, std::move(m)); }

// Either a value or an error Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}    // NOLINT: must be an error
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace iris

#define IRIS_CONCAT_INNER(a, b) a##b
#define IRIS_CONCAT(a, b) IRIS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is an error.
#define IRIS_TRY(expr)                              \
  do {                                              \
    ::iris::Status iris_try_status_ = (expr);       \
    if (!iris_try_status_.is_ok()) return iris_try_status_; \
  } while (0)

// `IRIS_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define IRIS_ASSIGN_OR_RETURN(lhs, expr) \
  IRIS_ASSIGN_OR_RETURN_IMPL(IRIS_CONCAT(iris_result_, __LINE__), lhs, expr)
#define IRIS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
