// `iris inspect`: what an archive, a snapshot or a safetensors file holds.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace iris {

// Returns the description as JSON; print_inspection() renders it as a table.
Result<nlohmann::json> inspect_path(const std::string& path);
void print_inspection(const nlohmann::json& j);

}  // namespace iris
