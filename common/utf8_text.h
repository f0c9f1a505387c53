// Text from outside (tensor names in a header, paths, parse errors quoting either) is not
// always UTF-8, while JSON and XML documents must be. Invalid bytes are written as the four
// characters \xHH, so a reader still sees which bytes they were.
#pragma once

#include <string>
#include <string_view>

namespace iris {

// Well-formed UTF-8 (Unicode 15, table 3-7: no overlong forms, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` with every byte that is not part of a well-formed sequence replaced by "\xHH".
std::string escape_invalid_utf8(std::string_view s);

// Length of the well-formed sequence starting at s[i], or 0 if there is none.
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace iris
