// Outputs never replace inputs: `iris convert SRC -o X --force` with X one of SRC's files (or
// a link to one) would destroy the source, and a report written over a shard likewise.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace iris {

// kInvalidArgument when `output` is, or resolves to (symlink, hard link), one of `inputs`.
// `what` names the output in the message ("output", "--report").
Status refuse_input_as_output(const std::string& output, const std::vector<std::string>& inputs, const std::string& what);

}  // namespace iris
