// The 4 KiB page: madvise ranges of a mapped file and the buffers and offsets of O_DIRECT
// writes are aligned to it.
#pragma once

#include <cstdint>

namespace iris {

inline constexpr uint64_t kPageBytes = 4096;

}  // namespace iris
