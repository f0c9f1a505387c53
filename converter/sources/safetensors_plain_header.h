// The common case of a safetensors header, read without a JSON library: what the reference
// writer produces (plain ASCII names, entries of "dtype", "shape" and "data_offsets", a
// "__metadata__" of plain strings), every rule of the full reader checked on it.
//
// Why: nlohmann's SAX reader builds a JSON value for every token, and a 10^6-tensor header
// (98 MB) took a third of `iris inspect` (issue 24 item 10). This reader declines anything
// else (an escape, a non-ASCII byte, an extra key, a number that is not a plain integer, any
// rule broken): the full reader (safetensors_file.cpp) then reads the header from the start,
// so every message, and which one comes first, stays the full reader's.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "converter/sources/safetensors_file.h"

namespace iris {

// Fills `tensors` (in document order, offsets relative to the data section) and `metadata`
// exactly as the full reader would, and returns true; or returns false, with both in an
// unspecified state, when the header is not one it takes or breaks a rule. Names are not yet
// checked for duplicates (the caller's index does it, and declines too).
bool parse_plain_safetensors_header(std::string_view header, std::vector<SafetensorsTensor>* tensors,
                                    std::map<std::string, std::string>* metadata);

}  // namespace iris
