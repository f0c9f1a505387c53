// The command line as users of git, cargo and pip type it, turned into what CLI11 parses:
// `iris help [COMMAND]`, `iris version` and `iris -V` as the flags they mean, output flags given
// before the command (`iris --json inspect X`) moved after it, and a word that names no command
// refused with the closest command suggested. Also: an unknown option of a command, named with
// the closest option of that command.
#pragma once

#include <string>
#include <vector>

namespace iris {

struct CommandLine {
  std::vector<std::string> args;  // what CLI11 parses (the program name first)
  std::string command;            // the command named, "" for none (--help, --version)
  std::string error;              // non-empty: a usage error, one line
};

// `commands`: the subcommand names; `valued_options`: options of the main program that take a
// value (their value is not a command); `movable_flags`: flags of every command that may come
// before the command's name.
CommandLine normalize_command_line(int argc, const char* const* argv, const std::vector<std::string>& commands,
                                   const std::vector<std::string>& valued_options, const std::vector<std::string>& movable_flags);

// For CLI11's "The following argument(s) were not expected: ..." naming options: "unknown
// option '--qaunt'; did you mean '--quant'?" from the command's own options (`options`, long
// and short names with their dashes); "" for any other message.
std::string unknown_option_text(const std::string& cli11_message, const std::vector<std::string>& options);

// For CLI11's error on a key of an --options-file that no option of its section has: "unknown
// key 'qaunt' under [convert]; did you mean 'quant'?"; "" for any other message.
std::string options_file_error_text(const std::string& cli11_message, const std::vector<std::string>& options);

}  // namespace iris
