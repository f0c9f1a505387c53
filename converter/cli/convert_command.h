// `iris convert` on the command line: its options and its run (converter/pipeline/convert.h
// does the work).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "common/atomic_output.h"
#include "converter/pipeline/convert.h"

namespace iris {

struct ConvertCommand {
  ConvertOptions options;
  bool quiet = false, json = false;
  // Sizes and the part as typed, parsed once CLI11 is done (cli/byte_size.h, parse_part_spec);
  // their options, to tell "given, even empty" from "not given".
  std::string max_rss, resume_every, max_file_size, part;
  CLI::Option *max_rss_option = nullptr, *resume_every_option = nullptr, *max_file_size_option = nullptr, *part_option = nullptr;
};

// Adds the `convert` subcommand to `app`, its values into `c` (which must outlive the parse).
CLI::App* add_convert_command(CLI::App& app, ConvertCommand& c);
// Runs a parsed `convert`: the process's exit code.
int run_convert_command(ConvertCommand& c, PartialFileRegistry* partial_files);

}  // namespace iris
