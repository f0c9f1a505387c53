// Shell completion scripts and a man page made from the command line's own definition (the
// CLI11 app), so that they cannot drift from `--help`: `iris completion bash|zsh`, `iris man`.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace iris {

// A bash completion script for `app` (commands, each command's options, files for the rest).
// zsh loads the same through bashcompinit.
std::string bash_completion(const CLI::App& app);
std::string zsh_completion(const CLI::App& app);

// The man page (roff, section 1): name, synopsis, each command with its options and example,
// and `exit_codes` (the footer text of `iris --help`).
std::string man_page(const CLI::App& app, const std::string& version, const std::string& exit_codes);

}  // namespace iris
