// Where tests find the fixtures and the iris binary: the paths the build recorded, unless the
// environment names others ($IRIS_TEST_DATA_DIR, $IRIS_BINARY). A test binary carried to
// another machine (the GPU one, bench/gpu_run.sh) then runs wherever the checkout lies.
#pragma once

#include <cstdlib>
#include <string>

namespace iris::test_paths {

inline std::string from_env(const char* name, const char* built_in) {
  const char* e = std::getenv(name);
  return e && *e ? e : built_in;
}

inline std::string data_dir() { return from_env("IRIS_TEST_DATA_DIR", IRIS_TEST_DATA_DIR); }
inline std::string fixtures() { return data_dir() + "/fixtures/"; }
#ifdef IRIS_BINARY
inline std::string iris_binary() { return from_env("IRIS_BINARY", IRIS_BINARY); }
#endif

}  // namespace iris::test_paths
