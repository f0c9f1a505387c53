// Shared helpers of the C API tests: archives made by the real `iris convert`, a safetensors
// reader (tests/quant/st_reader.h) for reference outputs, and RAII over the C handles.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "iris/iris.h"
#include "tests/cli_runner.h"
#include "tests/test_paths.h"
#include "tests/test_files.h"

namespace iris::capi_test {

inline const std::string kFix = test_paths::fixtures();

struct ArchiveCloser {
  void operator()(iris_archive* a) const { iris_archive_close(a); }
};
using ArchivePtr = std::unique_ptr<iris_archive, ArchiveCloser>;

// Opens `path`; on failure, *status and *message say why and the pointer is null.
inline ArchivePtr open_archive(const std::string& path, iris_status* status = nullptr, std::string* message = nullptr,
                               uint32_t flags = 0) {
  iris_archive* a = nullptr;
  char msg[512];
  iris_status s = iris_archive_open(path.c_str(), flags, &a, msg, sizeof msg);
  if (status) *status = s;
  if (message) *message = msg;
  return ArchivePtr(a);
}

// One archive per (fixture, convert options), converted once per test binary.
inline const std::string& converted(const std::string& fixture, const std::string& options = "") {
  static testing_files::TempDir dir;
  static std::map<std::string, std::string> done;
  const std::string key = fixture + "|" + options;
  auto it = done.find(key);
  if (it != done.end()) return it->second;
  const std::string path = dir / (std::to_string(done.size()) + ".iris");
  auto r = testing_cli::run("convert " + kFix + fixture + " -o " + path + " -q " + options);
  EXPECT_EQ(r.rc, 0) << r.out;
  return done[key] = path;
}

}  // namespace iris::capi_test
