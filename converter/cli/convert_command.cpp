// `iris convert`: its options (CLI11) and the run: sizes parsed, the progress bar, the report
// printed (cli/report_print.h), the summary line.
#include "converter/cli/convert_command.h"

#include <cstdio>

#include "converter/cli/byte_size.h"
#include "converter/cli/json_errors.h"
#include "converter/cli/progress.h"
#include "converter/cli/report_print.h"
#include "formats/json_text.h"

namespace iris {

namespace {

// No conversion fits less: the process itself, its buffers and one chunk take more. Below this
// a budget is a mistake (a bare number is bytes: "--max-rss 1").
constexpr uint64_t kMinMaxRss = uint64_t(16) << 20;

}  // namespace

CLI::App* add_convert_command(CLI::App& app, ConvertCommand& c) {
  CLI::App* convert = app.add_subcommand("convert", "Convert a snapshot (folder, .safetensors file or HF repo id) into an .iris archive");
  convert->add_option("SRC", c.options.source, "Snapshot folder, .safetensors file, org/name[@revision] in the HF cache, an .iris archive, or a seed-engine .iris v1 archive")->required();
  convert->add_option("--config", c.options.config, "For a .iris v1 source (which holds none): the model's config.json, or the snapshot folder with it and the tokenizer files");
  convert->add_option("-o,--output", c.options.output, "Archive to write (built in an unnamed file, O_TMPFILE, linked under OUTPUT when complete; where the filesystem has no O_TMPFILE, in OUTPUT.partial-PID-XXXXXX, renamed)")->required();
  convert->add_flag("--force", c.options.overwrite,
                    "Replace OUT (and the --report file) if it exists, only once the new archive is complete: a symbolic link's target is "
                    "replaced, the link kept; a device or FIFO is refused for OUT (use --dry-run to test a conversion) and written "
                    "through for --report");
  convert->add_option("--tile-n", c.options.tile_n, "Rows per tile of quantized codes")->capture_default_str();
  convert->add_option("--tile-k", c.options.tile_k, "Widest tile of quantized codes, in columns (multiple of 64); a narrower one (down to 128) where it pads a row less")->capture_default_str();
  convert->add_option("--quant", c.options.quant, "Target format of weight matrices: mxfp4, nf4, nvfp4 (ModelOpt arithmetic), fp8, fp8-channel, fp8-block, bf16, keep")
      ->check(CLI::IsMember({"mxfp4", "nf4", "nvfp4", "fp8", "fp8-channel", "fp8-block", "bf16", "keep"}))->capture_default_str();
  convert->add_option("--rule", c.options.rules, "REGEX=FORMAT for matching tensors (first match wins; repeatable)");
  convert->add_option("--skip", c.options.skips, "REGEX of tensors kept as they are (repeatable)");
  convert->add_option("--mxfp4-scale", c.options.mxfp4_scale, "MXFP4 scale choice: ocp (floor rule) or search (per-block least error)")
      ->check(CLI::IsMember({"ocp", "search"}))->capture_default_str();
  convert->add_flag("--allow-unmatched", c.options.allow_unmatched, "Accept --rule patterns that match nothing");
  convert->add_flag("--allow-nonfinite", c.options.allow_nonfinite, "Quantize tensors holding NaN or Inf instead of refusing");
  convert->add_flag("--allow-unscaled-fp8", c.options.allow_unscaled_fp8,
                    "Keep FP8 tensors that have no scale companion raw (their values are the weights) instead of refusing");
  convert->add_flag("--allow-suspect-scales", c.options.allow_packed.suspect_scales,
                    "Decode GPTQ / AWQ / compressed-tensors integers whose group scales, or NVFP4 weights whose scales, are zero, NaN or "
                    "non-finite (their weights come out "
                    "0, NaN or Inf, as the producing tool's do) instead of refusing");
  convert->add_flag("--allow-g-idx-mismatch", c.options.allow_packed.g_idx_mismatch,
                    "Decode by each column's g_idx even where it is not a permutation of whole groups or contradicts desc_act");
  convert->add_flag("--allow-fused-scale-mismatch", c.options.allow_packed.fused_scale_mismatch,
                    "Keep NVFP4 projections that engines fuse (q/k/v, gate/up) whose global scales differ, each with its own, "
                    "instead of refusing");
  convert->add_flag("--allow-zero-convention-mismatch", c.options.allow_packed.zero_convention,
                    "Decode GPTQ zero points by the declared checkpoint_format even where the stored ones follow the other convention");
  convert->add_flag("--dry-run", c.options.dry_run, "Print the per-tensor plan, the output size and the predicted peak memory; write nothing");
  c.max_rss_option = convert->add_option("--max-rss", c.max_rss,
                      "Memory budget (2GB, 512MiB, ...): smaller chunks are used to fit it, or the conversion is refused before it starts");
  convert->add_flag("!--no-direct-io", c.options.direct_io,
                    "Write the archive through the page cache (slower; it then stays cached for a following read)");
  c.max_file_size_option = convert->add_option("--max-file-size", c.max_file_size,
                      "Write an archive set: OUTPUT is a small index, the tensors go to OUTPUT's name -00001-of-0000N.iris beside it, "
                      "each file at most SIZE (40GB, 2GiB, ...: the Hugging Face Hub takes 50 GB a file); every reader opens the index "
                      "as the whole archive");
  convert->add_option("--report", c.options.report_path, "Write the per-tensor plan and quality report (JSON) here (with --dry-run: the plan, \"dry_run\": true)");
  convert->add_flag("--resume", c.options.resume,
                    "Survive a kill: commit the conversion (or the --part) in segments under OUTPUT.resume/ and merge them at the "
                    "end; run the same command again after an interruption and only the missing segments are converted");
  c.resume_every_option = convert->add_option("--resume-every", c.resume_every,
                      "With --resume: the output bytes a segment holds at most, unless one tensor is larger (default 1GiB)");
  convert->add_option("--tp", c.options.tp, "Write OUTPUT as a folder of one archive per tensor-parallel rank (iris shard's split rules)")
      ->check(CLI::Range(1u, 4096u));
  convert->add_option("--ep", c.options.ep, "With --tp: expert groups (divides --tp), whole experts over the groups")->check(CLI::Range(1u, 4096u));
  c.part_option = convert->add_option("--part", c.part,
                      "I/N: write only part I of N of this conversion (a contiguous run of its tensors, the N balanced by bytes); "
                      "`iris merge` joins the N parts into the archive this command writes without --part, byte for byte");
  convert->add_flag("-q,--quiet", c.quiet, "No progress bar or summary");
  convert->add_flag("--json", c.json, "Print a JSON summary on stdout");
  convert->footer("Examples:\n  iris convert ~/models/gpt-oss-20b -o gpt-oss-20b.iris\n  iris convert openai/gpt-oss-20b@main -o g.iris --force\n"
                  "  iris convert ~/models/llama -o llama-nf4.iris --quant nf4 --rule 'down_proj=fp8-block' --report q.json\n"
                  "  iris convert ~/models/llama -o x.iris --quant mxfp4 --dry-run\n"
                  "  iris convert ~/models/llama -o part-2.iris --quant nf4 --part 2/4   # then: iris merge part-*.iris -o llama-nf4.iris\n"
                  "Defaults: --quant applies to the weight matrices of linear layers and expert stacks; norms, biases,\n"
                  "embeddings, lm_head, routers, 1-D tensors and the checkpoint's own skip list stay as they are.");
  return convert;
}

int run_convert_command(ConvertCommand& c, PartialFileRegistry* partial_files) {
  if (c.max_rss_option->count()) {  // given, even as '' (an error, not "no budget")
    auto budget = parse_byte_size(c.max_rss, "--max-rss");
    if (budget.is_ok() && *budget < kMinMaxRss)
      budget = usage_error("--max-rss '" + c.max_rss + "' is " + std::to_string(*budget) +
                                 " bytes, below the smallest budget iris can plan for (16 MiB); give a unit, e.g. 512MiB or 2GB");
    if (!budget.is_ok()) return cli_fail(budget.status(), c.json ? "convert" : nullptr);
    c.options.max_rss = *budget;
  }
  if (c.resume_every_option->count()) {
    auto every = parse_byte_size(c.resume_every, "--resume-every");
    if (every.is_ok() && *every == 0) every = usage_error("--resume-every must be above 0 bytes");
    if (!every.is_ok()) return cli_fail(every.status(), c.json ? "convert" : nullptr);
    if (!c.options.resume) return cli_fail(usage_error("--resume-every applies to --resume"), c.json ? "convert" : nullptr);
    c.options.resume_every = *every;
  }
  if (c.max_file_size_option->count()) {
    auto limit = parse_byte_size(c.max_file_size, "--max-file-size");
    if (limit.is_ok() && *limit == 0) limit = usage_error("--max-file-size must be above 0 bytes");
    if (!limit.is_ok()) return cli_fail(limit.status(), c.json ? "convert" : nullptr);
    c.options.max_file_size = *limit;
  }
  if (c.part_option->count()) {
    auto spec = parse_part_spec(c.part);
    if (!spec.is_ok()) return cli_fail(spec.status(), c.json ? "convert" : nullptr);
    c.options.part = *spec;
  }
  ProgressBar bar("convert", !c.quiet);
  c.options.progress = [&](uint64_t done, uint64_t total) { bar.update(done, total); };
  c.options.partial_files = partial_files;
  auto r = run_convert(c.options);
  bar.finish();
  if (!r.is_ok()) return cli_fail(r.status(), c.json ? "convert" : nullptr);
  for (const auto& w : r->warnings) std::fprintf(stderr, "iris: warning: %s\n", w.c_str());
  if (c.json) {
    auto j = r->to_json();
    j["ok"] = true;
    std::printf("%s\n", dump_json(j, 2).c_str());
  } else if (c.options.dry_run) {
    print_plan(*r, stdout);
  } else if (!c.quiet) {
    print_quality_summary(*r, stderr);
  }
  // The summary line goes to CI logs too (not terminals); the bar alone is terminal-only.
  if (!c.json && !c.quiet && !c.options.dry_run) {
    const std::string part_text = c.options.part.active() ? "part " + c.options.part.text() + " (of " + std::to_string(r->total_tensors) + " tensors), " : "";
    const std::string set_text =
        r->written.set_files.empty() ? "" : " in " + std::to_string(r->written.set_files.size()) + " files (an index and its members)";
    if (r->shard)
      std::fprintf(stderr, "wrote %s: %u rank archives of %zu tensors (%llu split, %llu replicated) in %.2f s\n", c.options.output.c_str(),
                   r->shard->ranks, r->tensors, (unsigned long long)r->shard->split_tensors,
                   (unsigned long long)r->shard->replicated_tensors, r->seconds + r->shard->seconds);
    else
      std::fprintf(stderr, "wrote %s: %s%zu tensors (%zu quantized), %s%s in %.2f s\n", c.options.output.c_str(), part_text.c_str(), r->tensors,
                   r->quantized_tensors, human_bytes(double(r->written.file_bytes)).c_str(), set_text.c_str(), r->seconds);
  }
  return 0;
}

}  // namespace iris
