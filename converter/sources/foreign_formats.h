// Files that are not safetensors but reach a reader that expects one (a convert source, a
// shard): named by their magic bytes, with what to do instead, so the user is not told
// "header length N exceeds the limit" about a GGUF file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace iris {

// For a file that starts with another format's signature: a one-line description of what
// it is and what to do (no path; callers add it). nullopt: not a format we recognise.
std::optional<std::string> foreign_format_hint(std::span<const uint8_t> head);

}  // namespace iris
