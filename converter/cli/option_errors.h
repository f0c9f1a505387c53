// Command-line option errors as one line, in iris's own words: CLI11's "--quant: NF4 not in
// {mxfp4,nf4,...}" becomes "--quant: 'NF4' is not one of mxfp4, nf4, ...; did you mean
// 'nf4'?", the closest choice by case or by at most two edits.
#pragma once

#include <string>
#include <vector>

namespace iris {

// The choice closest to `given` (same letters ignoring case, else within two edits), or "".
std::string closest_choice(const std::string& given, const std::vector<std::string>& choices);

// CLI11's message of a parse error rewritten as above (other messages unchanged, on one line).
std::string option_error_text(const std::string& cli11_message);

}  // namespace iris
