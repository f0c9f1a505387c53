// The `iris` command line: convert (and its parts and resume), merge, inspect, export, verify.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/json_text.h"
#include "common/parallel_for.h"
#include "converter/cli/partial_files.h"
#include "converter/cli/bench_command.h"
#include "converter/cli/byte_size.h"
#include "converter/cli/command_line.h"
#include "converter/cli/convert_command.h"
#include "converter/cli/exit_codes.h"
#include "converter/cli/json_errors.h"
#include "converter/cli/option_errors.h"
#include "converter/pipeline/convert.h"
#include "converter/exports/export.h"
#include "converter/exports/export_folder.h"
#include "converter/exports/extract.h"
#include "converter/inspect/inspect.h"
#include "converter/pipeline/merge.h"
#include "converter/shard/shard.h"
#include "converter/cli/progress.h"
#include "converter/cli/report_print.h"
#include "converter/cli/shell_docs.h"
#include "converter/cli/verify_command.h"
#include "converter/cli/wait_policy.h"

#include <omp.h>

namespace {

constexpr const char* kExitCodes = R"(Exit codes:
  0  success
  2  usage error (bad options, output exists without --force)
  3  invalid or corrupt input (source checkpoint or archive)
  4  verification failed (archive well-formed, but a check failed)
  5  I/O error (an input that does not exist, read, write, rename, disk full)
  6  no usable GPU for --device cuda
  7  unsupported (valid input this version cannot handle)
 70  internal error (a bug: please report it))";

// What --force does to what is not a regular file (common/atomic_output.h).
constexpr const char* kForceTargets =
    " (a symbolic link's target is replaced, the link kept; a device or FIFO such as /dev/null is written through)";

int fail(const iris::Status& s, const char* json_command = nullptr) { return iris::cli_fail(s, json_command); }

}  // namespace

int main(int argc, char** argv) {
  iris::ensure_passive_waiting(argv);
  iris::PartialFileRegistry* partial_files = iris::install_partial_file_cleanup();
  CLI::App app{"iris: convert Hugging Face checkpoints into kernel-ready .iris archives", "iris"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", iris::version_text(IRIS_VERSION));
  // Long --rule/--skip lists (and any other option) in a TOML file, CLI11's config format: a
  // command's options under its [section], e.g. [convert] quant = "nf4", rule = ["^lm_head=mxfp4"].
  // Options on the command line are read too; for a repeatable one both lists are kept.
  app.set_config("--options-file", "", "TOML file of options, a command's under its [name]: [convert] quant = \"nf4\" "
                                      "rule = [\"REGEX=FORMAT\", ...] skip = [...]");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, never ignored
  // Options of the main app may follow the subcommand ("iris convert X --threads 2").
  app.fallthrough();
  int threads = 0;
  app.add_option("--threads", threads,
                 "Worker threads for encoding, decoding and checks (default 0: one per core, as OpenMP counts them; "
                 "waiting threads sleep unless OMP_WAIT_POLICY says otherwise)")
      ->check(CLI::Range(0, 4096));

  // convert (cli/convert_command.cpp)
  iris::ConvertCommand cc;
  iris::ConvertOptions& co = cc.options;
  const bool& json_out = cc.json;
  bool quiet = false;  // export and verify: -q
  CLI::App* convert = iris::add_convert_command(app, cc);

  // merge
  iris::MergeOptions mo;
  bool merge_json = false, merge_quiet = false;
  auto* merge = app.add_subcommand("merge", "Join the parts of one conversion (iris convert --part I/N) into its archive");
  merge->add_option("PARTS", mo.parts, "Every part's archive, in any order")->required();
  merge->add_option("-o,--output", mo.output, "Archive to write: byte for byte what the conversion writes without --part")->required();
  std::string merge_max_file_size;
  auto* merge_max_file_size_option = merge->add_option("--max-file-size", merge_max_file_size,
                      "Write the archive set that the conversion writes with this --max-file-size (OUTPUT is its index)");
  merge->add_flag("--force", mo.overwrite, std::string("Replace OUTPUT if it exists") + kForceTargets);
  merge->add_flag("!--no-direct-io", mo.direct_io, "Write the archive through the page cache");
  merge->add_flag("-q,--quiet", merge_quiet, "No progress bar or summary");
  merge->add_flag("--json", merge_json, "Print a JSON summary (or the error) on stdout");
  merge->footer("Example:\n  for i in 1 2 3 4; do iris convert ~/models/llama -o p$i.iris --quant nf4 --part $i/4; done\n"
                "  iris merge p1.iris p2.iris p3.iris p4.iris -o llama-nf4.iris\n"
                "Refused, naming the file: a part missing or given twice, parts of another source, options or iris version,\n"
                "a corrupt part (nothing is written then).");

  // inspect
  std::string inspect_path;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "List the tensors of an archive, a snapshot or a safetensors file");
  inspect->add_option("PATH", inspect_path, "Archive, snapshot folder, .safetensors file or HF repo id")->required();
  inspect->add_flag("--json", inspect_json, "Machine-readable output");
  inspect->footer("Example:\n  iris inspect model.iris\n  iris inspect ~/models/llama --json | jq '.tensors[0]'");

  // export
  iris::ExportOptions eo;
  auto* exp = app.add_subcommand("export", "Write an archive back out as a standard safetensors file or a seed-engine .iris v1 archive");
  exp->add_option("ARCHIVE", eo.archive, "The .iris archive")->required();
  exp->add_option("-o,--output", eo.output, "File to write; a folder (DIR/) writes a Hugging Face snapshot folder transformers loads")->required();
  std::string max_shard = "5GB";
  exp->add_option("--max-shard-size", max_shard, "Folder exports: largest safetensors shard (5GB, 500MB, 2GiB, ...)")->capture_default_str();
  exp->add_option("--format", eo.format, "safetensors | iris-v1 (the seed engine's archive: gpt-oss with MXFP4 experts)")
      ->check(CLI::IsMember({"safetensors", "iris-v1"}))
      ->capture_default_str();
  exp->add_option("--dtype", eo.dtype, "keep | bf16 | f16 | f32")->check(CLI::IsMember({"keep", "bf16", "f16", "f32"}))->capture_default_str();
  exp->add_flag("--force", eo.overwrite,
               std::string("Replace OUTPUT if it exists") + kForceTargets +
                   "; for DIR/, only the files the export writes are replaced, other files in DIR are kept");
  exp->add_flag("-q,--quiet", quiet, "No progress bar");
  bool export_json = false;
  exp->add_flag("--json", export_json, "Print a JSON summary (or the error) on stdout");
  exp->footer(
      "Example:\n  iris export model.iris -o model.safetensors\n  iris export model.iris -o model-f32.safetensors --dtype f32\n"
      "  iris export gpt-oss.iris --format iris-v1 -o gpt-oss.v1.iris\n  iris export model.iris -o model-hf/ --max-shard-size 2GB");

  // extract
  iris::ExtractOptions xo;
  bool extract_json = false;
  auto* extract = app.add_subcommand("extract", "Write one embedded file (config.json, tokenizer files, ...) of an archive");
  extract->add_option("ARCHIVE", xo.archive, "The .iris archive")->required();
  extract->add_option("NAME", xo.name, "The embedded file, as iris inspect lists it")->required();
  extract->add_option("-o,--output", xo.output, "File to write, or - for standard output")->required();
  extract->add_flag("--force", xo.overwrite, std::string("Replace OUTPUT if it exists") + kForceTargets);
  extract->add_flag("--json", extract_json, "Print a JSON summary (or the error) on stdout");
  bool extract_quiet = false;
  extract->add_flag("-q,--quiet", extract_quiet, "No summary line");
  extract->footer("Example:\n  iris extract model.iris config.json -o config.json\n  iris extract model.iris tokenizer.json -o - | head");

  // verify
  iris::VerifyOptions vo;
  auto* verify = app.add_subcommand("verify", "Check an archive: structure, every checksum, and (with --device cuda) the GPU kernels");
  verify->add_option("ARCHIVE", vo.archive, "The .iris archive (or an archive set's index)");
  std::string ranks_folder;
  verify->add_option("--ranks", ranks_folder,
                     "Instead of ARCHIVE: prove a folder of rank archives (iris shard, convert --tp) complete and consistent, every "
                     "element of every tensor held once or replicated by rule; with --against WHOLE.iris, each rank's decode equal "
                     "bit for bit to its box of WHOLE's; with --device cuda, every rank's quantized tensors also through the GPU "
                     "dequant, bit for bit their CPU decode, and the GEMV probe");
  verify->add_option("--device", vo.device, "cpu: structure and checksums; cuda: also GPU dequant vs CPU reference")
      ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  verify->add_flag("--json", vo.json, "Print the report as JSON on stdout");
  verify->add_flag("-v,--verbose", vo.verbose, "List passing tensors too");
  verify->add_flag("-q,--quiet", quiet, "No progress bar");
  verify->add_option("--junit", vo.junit_path, "Also write the checks as JUnit XML (one test case per tensor and check) to FILE");
  verify->add_flag("--force", vo.overwrite, std::string("Replace an existing --junit file") + kForceTargets);
  verify->add_flag("--strict", vo.strict,
                   "Fail on what passes with a warning (negative or zero FP8 scales, negative bitsandbytes absmax)");
  verify->add_option("--against", vo.against,
                     "Also compare every tensor with SRC (snapshot folder, file, repo id or archive): same names and shapes, "
                     "lossless tensors bit for bit, requantized ones within the format's error limits");
  verify->add_option("--max-rel-l2", vo.max_rel_l2, "[REGEX=]LIMIT on the relative L2 error of requantized tensors (repeatable)");
  verify->add_option("--min-snr-db", vo.min_snr_db, "[REGEX=]LIMIT on the SNR of requantized tensors (repeatable)");

  // shard
  iris::ShardOptions so;
  bool shard_json = false, shard_quiet = false;
  auto* shard = app.add_subcommand("shard", "Cut an archive into one archive per tensor/expert-parallel rank");
  shard->add_option("ARCHIVE", so.archive, "The whole archive (or an archive set's index)")->required();
  shard->add_option("-o,--output", so.output, "Folder for the rank archives (rank-00000-of-0000N.iris, ...)")->required();
  shard->add_option("--tp", so.spec.tp, "Ranks: attention and dense layers split this many ways")->required()->check(CLI::Range(1u, 4096u));
  shard->add_option("--ep", so.spec.ep, "Expert groups (divides --tp): whole experts over the groups, each split over its group's ranks")
      ->check(CLI::Range(1u, 4096u))->capture_default_str();
  shard->add_flag("--force", so.overwrite, std::string("Replace rank archives that exist") + kForceTargets);
  shard->add_flag("!--no-direct-io", so.direct_io, "Write through the page cache");
  shard->add_flag("-q,--quiet", shard_quiet, "No progress bar or summary");
  shard->add_flag("--json", shard_json, "Print a JSON summary (or the error) on stdout");
  shard->footer("Example:\n  iris shard gpt-oss-120b.iris --tp 4 --ep 4 -o ranks/ && iris verify --ranks ranks/ --against gpt-oss-120b.iris");

  // diff
  iris::DiffOptions dfo;
  auto* diff = app.add_subcommand("diff", "Compare two archives, or an archive and a snapshot, tensor by tensor");
  diff->add_option("A", dfo.a, "Archive or snapshot")->required();
  diff->add_option("B", dfo.b, "Archive or snapshot (the reference)")->required();
  diff->add_flag("--json", dfo.json, "Machine-readable output");
  diff->footer("Example:\n  iris diff llama-nf4.iris ~/models/llama   # rel L2, SNR, max error per tensor");
  verify->footer("Example:\n  iris verify model.iris && echo ok\n  iris verify model.iris --device cuda --json > report.json");

  // bench
  iris::BenchCommandOptions bo;
  auto* bench = app.add_subcommand("bench", "Time the GPU kernels (dequant, GEMV) against the card's copy bandwidth");
  bench->add_option("ARCHIVE", bo.archive, "Time the quantized tensors of this archive (their layouts, random data)");
  bench->add_option("--synthetic", bo.synthetic, "FORMAT:SHAPE cases, e.g. nf4:14336x4096 (repeatable; default: the goal shapes)");
  bench->add_option("--batch", bo.batches, "GEMV batch sizes")->delimiter(',')->capture_default_str();
  bench->add_option("--peers", bo.peers, "Peer timings (JSON from bench/peers.py) to compare with");
  bench->add_option("--tile", bo.tile, "Tile (tile_n x tile_k) of the synthetic cases")->capture_default_str();
  bench->add_option("--variant", bo.variants, "Kernel variant NAME=VALUE: dequant-unroll=1|2|4|8, dequant-item=8|16, gemv=auto|cuda-cores, gemv-unroll=1|2, gemv-prefetch=off|on, programmatic=off|on|late, gemv-l2-prefetch=off|on, gemv-spread=off|on, gemv-blocks=1..32 (at most N blocks a SM), gemv-warps=1..16, fp8-decode=cvt|bits, nf4-table=split|pairs|bf16 (bf16: the declared BF16 table, a looser bound), nf4-absmax=precomputed|inline (with nf4-table=bf16: the absmax as one BF16 a block worked out ahead, as uploads do, or from its inputs at each chunk), nf4-scaled=off|on (with nf4-table=bf16: the absmax on the BF16 weights, bitsandbytes' arithmetic, or on the partial sums), nf4-chunk=64|128 (with nf4-table=bf16 and nf4-scaled=off), nf4-lookup=smem|permute (with nf4-table=bf16: the table a shared-memory copy a lane, or in registers looked up by byte permutes); measurement aids with meaningless outputs: gemv-probe=skip-decode|nf4-skip-absmax|nf4-skip-table (a build with -DIRIS_KERNEL_PROBES=ON; the nf4 ones with nf4-table=bf16), dequant-probe=skip-decode (repeatable)");
  bench->add_option("--replays", bo.replays, "Timed graph replays per kernel")->capture_default_str();
  bench->add_flag("--floors", bo.floors, "Also time the floors of each case: a read-only kernel over the GEMV's input bytes, a read+write stream over the dequant's");
  bench->add_flag("--l2-hot", bo.l2_hot, "Run every timed launch on the same inputs, which stay in L2 where they fit (a kernel's time after an L2 prefetch of its weights)");
  bench->add_flag("--json", bo.json, "Machine-readable output");
  bench->footer("Example:\n  iris bench\n  iris bench --synthetic mxfp4:32x5760x2880 --batch 1 --json");

  // completion, man: made from the definitions above, so they cannot drift from --help
  std::string shell;
  auto* completion = app.add_subcommand("completion", "Print a shell completion script (bash, zsh)");
  completion->add_option("SHELL", shell, "bash | zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  completion->footer("Example:\n  source <(iris completion bash)\n  iris completion zsh > \"${fpath[1]}/_iris\"");
  auto* man = app.add_subcommand("man", "Print the man page (roff)");
  man->footer("Example:\n  iris man > iris.1 && man -l iris.1");

  std::vector<std::string> commands;
  for (const auto* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  const iris::CommandLine line =
      iris::normalize_command_line(argc, argv, commands, {"--threads"}, {"--json", "-q", "--quiet", "-v", "--verbose"});
  // One line, iris's prefix, the closest command, option or choice suggested, the command's
  // own --help named; JSON on stdout with --json.
  const bool wants_json = std::find(line.args.begin(), line.args.end(), "--json") != line.args.end();
  auto usage_failure = [&](const std::string& message) {
    const iris::Status s = iris::usage_error(message);
    if (wants_json) {  // the error object alone, as a parse error always printed it
      iris::print_json_error(line.command, s);
      return int(iris::kExitUsage);
    }
    std::fprintf(stderr, "iris: error: %s\n", s.message().c_str());
    return int(iris::kExitUsage);
  };
  if (!line.error.empty()) return usage_failure(line.error);
  // A missing --options-file is a missing input (exit 5), as everywhere else.
  for (size_t i = 1; i < line.args.size(); ++i) {
    const std::string& a = line.args[i];
    const std::string flag = "--options-file", with_value = flag + "=";
    const std::string path = a.rfind(with_value, 0) == 0 ? a.substr(with_value.size()) : a == flag && i + 1 < line.args.size() ? line.args[i + 1] : "";
    std::error_code ec;
    if (!path.empty() && !std::filesystem::is_regular_file(path, ec))
      return fail(iris::io_error(flag + " " + path + ": no such file"), wants_json ? line.command.c_str() : nullptr);
  }
  try {
    std::vector<const char*> args;
    for (const auto& a : line.args) args.push_back(a.c_str());
    app.parse(int(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string see = " (see iris " + (line.command.empty() ? std::string() : line.command + " ") + "--help)";
    std::vector<std::string> options;
    const CLI::App* scopes[] = {&app, line.command.empty() ? nullptr : app.get_subcommand(line.command)};
    for (const CLI::App* scope : scopes)
      if (scope)
        for (const auto* o : scope->get_options()) {
          for (const auto& n : o->get_lnames()) options.push_back("--" + n);
          for (const auto& n : o->get_snames()) options.push_back("-" + n);
        }
    if (const std::string file = iris::options_file_error_text(e.what(), options); !file.empty())
      return usage_failure(file + see);
    const std::string unknown = iris::unknown_option_text(e.what(), options);
    return usage_failure((line.command.empty() || !unknown.empty() ? "" : line.command + ": ") +
                         (unknown.empty() ? iris::option_error_text(e.what()) : line.command + ": " + unknown) + see);
  }

  // Both kinds of parallel loop: the converter's OpenMP workers and the library's codec loops.
  if (threads > 0) omp_set_num_threads(threads);
  iris::ThreadLimit codec_threads(threads);

  // An empty path is a usage error (exit 2), not a file the system cannot find (exit 5).
  for (const auto& [sub, path] : {std::pair{convert, &co.output}, std::pair{convert, &co.report_path}, std::pair{merge, &mo.output}, std::pair{exp, &eo.output},
                                  std::pair{extract, &xo.output}, std::pair{verify, &vo.junit_path}}) {
    const char* option = path == &co.report_path ? "--report" : path == &vo.junit_path ? "--junit" : "--output";
    if (sub->parsed() && path->empty() && sub->get_option(option)->count())
      return fail(iris::usage_error(std::string(option) + ": the path is empty"),
                  (sub == convert && json_out) || (sub == merge && merge_json) || (sub == exp && export_json) || (sub == extract && extract_json) || (sub == verify && vo.json)
                      ? sub->get_name().c_str()
                      : nullptr);
  }
  // "-" is standard output only where a command streams (extract); elsewhere it would be a
  // file named "-".
  if ((convert->parsed() && co.output == "-") || (exp->parsed() && eo.output == "-") || (merge->parsed() && mo.output == "-")) {
    const char* name = convert->parsed() ? "convert" : merge->parsed() ? "merge" : "export";
    const bool to_json = convert->parsed() ? json_out : merge->parsed() ? merge_json : export_json;
    return fail(iris::usage_error(std::string(name) +
                                  ": -o -: writes an archive, file or folder, not standard output; give a path (`./-` for a file named -)"),
                to_json ? name : nullptr);
  }
  if (convert->parsed()) return iris::run_convert_command(cc, partial_files);
  if (merge->parsed()) {
    if (merge_max_file_size_option->count()) {
      auto limit = iris::parse_byte_size(merge_max_file_size, "--max-file-size");
      if (limit.is_ok() && *limit == 0) limit = iris::usage_error("--max-file-size must be above 0 bytes");
      if (!limit.is_ok()) return fail(limit.status(), merge_json ? "merge" : nullptr);
      mo.max_file_size = *limit;
    }
    iris::ProgressBar bar("merge", !merge_quiet && !merge_json);
    mo.progress = [&](uint64_t done, uint64_t total) { bar.update(done, total); };
    mo.partial_files = partial_files;
    auto r = iris::run_merge(mo);
    bar.finish();
    if (!r.is_ok()) return fail(r.status(), merge_json ? "merge" : nullptr);
    if (merge_json)
      std::printf("%s\n", iris::dump_json({{"ok", true}, {"output", mo.output}, {"parts", r->parts}, {"tensors", r->tensors},
                                           {"file_bytes", r->written.file_bytes}, {"set_files", iris::set_files_json(r->written)},
                                           {"seconds", r->seconds}}, 2).c_str());
    else if (!merge_quiet)
      std::fprintf(stderr, "wrote %s: %zu parts, %zu tensors, %s in %.2f s\n", mo.output.c_str(), r->parts, r->tensors,
                   iris::human_bytes(double(r->written.file_bytes)).c_str(), r->seconds);
    return 0;
  }
  if (inspect->parsed()) {
    auto r = iris::Inspection::open(inspect_path);
    if (!r.is_ok()) return fail(r.status(), inspect_json ? "inspect" : nullptr);
    if (inspect_json) iris::print_inspection_json(*r, stdout);
    else iris::print_inspection(*r);
    return 0;
  }
  if (exp->parsed()) {
    auto shard = iris::parse_byte_size(max_shard, "--max-shard-size");
    if (!shard.is_ok()) return fail(shard.status(), export_json ? "export" : nullptr);
    eo.max_shard_bytes = *shard;
    iris::ProgressBar bar("export", !quiet);
    eo.progress = [&](uint64_t done, uint64_t total) { bar.update(done, total); };
    eo.partial_files = partial_files;
    auto r = iris::run_export(eo);
    bar.finish();
    if (!r.is_ok()) return fail(r.status(), export_json ? "export" : nullptr);
    if (export_json) std::printf("%s\n", iris::dump_json({{"ok", true}, {"output", eo.output}, {"tensors", r->tensors}, {"bytes", r->bytes}}, 2).c_str());
    else if (!quiet)  // the summary line, in logs too (the bar is terminal-only)
      std::fprintf(stderr, "wrote %s: %zu tensors, %s\n", eo.output.c_str(), size_t(r->tensors), iris::human_bytes(double(r->bytes)).c_str());
    return 0;
  }
  if (extract->parsed()) {
    xo.partial_files = partial_files;
    if (extract_json && xo.output == "-") return fail(iris::usage_error("--json and -o - both want standard output"), "extract");
    auto r = iris::run_extract(xo);
    if (!r.is_ok()) return fail(r.status(), extract_json ? "extract" : nullptr);
    if (extract_json) std::printf("%s\n", iris::dump_json({{"ok", true}, {"output", xo.output}, {"name", xo.name}, {"bytes", *r}}, 2).c_str());
    else if (xo.output != "-" && !extract_quiet)
      std::fprintf(stderr, "wrote %s: %s, %s\n", xo.output.c_str(), xo.name.c_str(), iris::human_bytes(double(*r)).c_str());
    return 0;
  }
  if (completion->parsed()) {
    std::fputs((shell == "zsh" ? iris::zsh_completion(app) : iris::bash_completion(app)).c_str(), stdout);
    return 0;
  }
  if (man->parsed()) {
    std::fputs(iris::man_page(app, IRIS_VERSION, kExitCodes).c_str(), stdout);
    return 0;
  }
  if (bench->parsed()) return iris::run_bench_command(bo);
  if (diff->parsed()) return iris::run_diff_command(dfo);
  if (shard->parsed()) {
    iris::ProgressBar bar("shard", !shard_quiet && !shard_json);
    so.progress = [&](uint64_t done, uint64_t total) { bar.update(done, total); };
    so.partial_files = partial_files;
    auto r = iris::run_shard(so);
    bar.finish();
    if (!r.is_ok()) return fail(r.status(), shard_json ? "shard" : nullptr);
    for (const auto& name : r->unruled)
      std::fprintf(stderr, "iris: warning: tensor '%s': no split rule names this matrix: replicated on every rank\n", name.c_str());
    if (shard_json) {
      auto j = r->to_json();
      j["ok"] = true;
      std::printf("%s\n", iris::dump_json(j, 2).c_str());
    } else if (!shard_quiet) {
      std::fprintf(stderr, "wrote %s: %u ranks, %llu tensors (%llu split, %llu replicated) in %.2f s\n", so.output.c_str(), r->ranks,
                   (unsigned long long)r->logical_tensors, (unsigned long long)r->split_tensors, (unsigned long long)r->replicated_tensors,
                   r->seconds);
    }
    return 0;
  }
  if (verify->parsed()) {
    if (ranks_folder.empty() == vo.archive.empty())
      return fail(iris::usage_error("verify: give ARCHIVE or --ranks DIR (one of them)"), vo.json ? "verify" : nullptr);
    if (!ranks_folder.empty()) return iris::run_verify_ranks_command(ranks_folder, vo.against, vo.device, vo.json);
    vo.show_progress = !quiet;
    return iris::run_verify_command(vo);
  }
  return iris::kExitUsage;
}
