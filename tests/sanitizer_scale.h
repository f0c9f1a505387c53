// Whether this test binary runs under AddressSanitizer: the CI's second build (scripts/run.sh
// test), where each process runs several times slower. A few tests repeat one path over many
// inputs -- whole conversions, one per part count or rank layout -- and there take every
// other input: the sanitizer looks for memory errors, which the path shows on one input as well
// as on five, and the main build still runs every input.
#pragma once

#include <cstddef>

namespace iris::test_scale {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

// Whether input i of a repeated path runs in this build: every one, or under the sanitizer
// the even ones (the first always).
inline constexpr bool runs_input(std::size_t i) { return !kUnderSanitizer || i % 2 == 0; }

}  // namespace iris::test_scale
