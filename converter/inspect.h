// `iris inspect`: what an archive, a snapshot or a safetensors file holds.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace iris {

// Returns the description as JSON (the CLI renders it: converter/cli/report_print.h).
Result<nlohmann::json> inspect_path(const std::string& path);

}  // namespace iris
