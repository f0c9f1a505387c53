// Sizes typed on the command line: 5GB, 500MB, 2GiB, 1048576 (--max-shard-size, --max-rss).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace iris {

// `option` names the flag in the error ("--max-rss '2XB': unknown unit ...").
Result<uint64_t> parse_byte_size(const std::string& text, const std::string& option);

}  // namespace iris
