#include "converter/pipeline/output_guard.h"

#include <filesystem>

namespace iris {

Status refuse_input_as_output(const std::string& output, const std::vector<std::string>& inputs, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(output, ec)) return Status::ok();  // a dangling name cannot be an input
  for (const auto& in : inputs) {
    std::error_code e;
    if (fs::equivalent(output, in, e))
      return invalid_argument(what + " '" + output + "' is the input file '" + in + "' (or a link to it); refusing to replace it");
  }
  return Status::ok();
}

}  // namespace iris
