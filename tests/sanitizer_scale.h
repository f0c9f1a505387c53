// Whether this test binary is the sanitizer build's (IRIS_SANITIZE, which tests/CMakeLists.txt
// passes on as IRIS_UNDER_SANITIZER): the CI's second build (scripts/run.sh test), where each
// process runs several times slower. A few tests repeat one path over many inputs -- whole
// conversions, one per part count or rank layout -- and there take every other input: the
// sanitizer looks for memory errors, which the path shows on one input as well as on five, and
// the main build still runs every input.
#pragma once

#include <cstddef>
#include <vector>

namespace iris::test_scale {

#ifdef IRIS_UNDER_SANITIZER
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif

// The inputs of a repeated path this build runs: all, or under the sanitizer the even ones
// (the first always).
template <typename T, std::size_t N>
std::vector<T> inputs(const T (&all)[N]) {
  std::vector<T> out;
  for (std::size_t i = 0; i < N; ++i)
    if (!kUnderSanitizer || i % 2 == 0) out.push_back(all[i]);
  return out;
}

}  // namespace iris::test_scale
