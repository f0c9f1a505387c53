// The command line as users of git, cargo and pip type it (issue 26): help and version words,
// the closest command or option suggested with the command's own --help, flags before the
// command, "-" refused where it would make a file named "-", summary lines in logs, and a
// repo id missing from the HF cache treated as a missing input.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "converter/cli/progress.h"
#include "converter/inspect/compare.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using testing_cli::run_env;
using testing_cli::run_shell;
using testing_cli::run_stdout;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CliIdioms, AWordThatIsNoCommandGetsTheClosestOne) {
  auto r = run("conver x");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.out, "iris: error: unknown command 'conver'; did you mean 'convert'?")) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  auto far = run("frobnicate");
  EXPECT_EQ(far.rc, 2);
  EXPECT_TRUE(has(far.out, "unknown command 'frobnicate' (commands: convert, merge, inspect")) << far.out;
  EXPECT_FALSE(has(far.out, "did you mean")) << far.out;
  auto none = run("");
  EXPECT_EQ(none.rc, 2);
  EXPECT_TRUE(has(none.out, "no command given (commands: convert")) << none.out;
}

TEST(CliIdioms, VersionAndHelpAsWords) {
  const auto flag = run("--version");
  ASSERT_EQ(flag.rc, 0) << flag.out;
  for (const char* args : {"version", "-V"}) {
    auto r = run(args);
    EXPECT_EQ(r.rc, 0) << args << ": " << r.out;
    EXPECT_EQ(r.out, flag.out) << args;
  }
  auto help = run("help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_TRUE(has(help.out, "Usage: iris [OPTIONS] SUBCOMMAND")) << help.out;
  auto sub = run("help convert");
  EXPECT_EQ(sub.rc, 0);
  EXPECT_TRUE(has(sub.out, "Usage: iris convert")) << sub.out;
  EXPECT_EQ(sub.out, run("convert --help").out);
  auto typo = run("help conver");
  EXPECT_EQ(typo.rc, 2);
  EXPECT_TRUE(has(typo.out, "help: no command 'conver'; did you mean 'convert'?")) << typo.out;
}

TEST(CliIdioms, AnUnknownOptionGetsTheCommandsClosestOneAndItsHelp) {
  auto r = run("convert " + kFix + "llama-bf16 -o /tmp/never.iris --qaunt nf4");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.out, "iris: error: convert: unknown option '--qaunt'; did you mean '--quant'? (see iris convert --help)")) << r.out;
  EXPECT_FALSE(fs::exists("/tmp/never.iris"));
  auto v = run("verify x.iris --max-rel-l3 0.1");
  EXPECT_TRUE(has(v.out, "verify: unknown option '--max-rel-l3'; did you mean '--max-rel-l2'? (see iris verify --help)")) << v.out;
  // A short option is not matched to another: any two are within two edits.
  auto s = run("inspect " + kFix + "llama-bf16 -z");
  EXPECT_EQ(s.rc, 2);
  EXPECT_TRUE(has(s.out, "inspect: unknown option '-z' (see iris inspect --help)")) << s.out;
  // A bad value names the command too.
  auto q = run("convert x -o y --quant NF4");
  EXPECT_TRUE(has(q.out, "convert: --quant: 'NF4' is not one of")) << q.out;
  EXPECT_TRUE(has(q.out, "(see iris convert --help)")) << q.out;
}

TEST(CliIdioms, OutputFlagsBeforeTheCommandApplyToIt) {
  auto r = run_stdout("--json inspect " + kFix + "llama-bf16");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j.contains("tensors"));
  auto missing = run_stdout("--json inspect /nonexistent/model");
  EXPECT_EQ(missing.rc, 5);
  auto e = nlohmann::json::parse(missing.out, nullptr, false);
  ASSERT_FALSE(e.is_discarded()) << missing.out;
  EXPECT_EQ(e["command"], "inspect");
  TempDir d;
  auto quiet = run("--threads 1 -q convert " + kFix + "llama-bf16 -o " + (d / "a.iris"));
  EXPECT_EQ(quiet.rc, 0) << quiet.out;
  EXPECT_EQ(quiet.out, "");
}

TEST(CliIdioms, DashIsRefusedWhereItWouldBeAFileNamedDash) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  for (const std::string& args : {"export " + (d / "a.iris") + " -o -", "convert " + kFix + "llama-bf16 -o -"}) {
    auto r = run_shell("cd " + d.path.string() + " && " + test_paths::iris_binary() + " " + args + " 2>&1");
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, "-o -: writes an archive, file or folder, not standard output")) << r.out;
    EXPECT_FALSE(fs::exists(d.path / "-")) << args;
  }
  // extract streams: "-" is standard output there.
  auto x = run_stdout("extract " + (d / "a.iris") + " config.json -o -");
  EXPECT_EQ(x.rc, 0);
  EXPECT_TRUE(has(x.out, "\"model_type\"")) << x.out;
}

TEST(CliIdioms, ExportAndExtractPrintASummaryLineUnlessQuiet) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  auto e = run("export " + (d / "a.iris") + " -o " + (d / "a.safetensors"));  // stderr is a pipe here, as in CI logs
  EXPECT_EQ(e.rc, 0);
  EXPECT_TRUE(has(e.out, "wrote " + (d / "a.safetensors") + ": ")) << e.out;
  EXPECT_TRUE(has(e.out, " tensors, ")) << e.out;
  EXPECT_EQ(run("export " + (d / "a.iris") + " -o " + (d / "b.safetensors") + " -q").out, "");
  auto x = run("extract " + (d / "a.iris") + " config.json -o " + (d / "config.json"));
  EXPECT_EQ(x.rc, 0);
  EXPECT_TRUE(has(x.out, "wrote " + (d / "config.json") + ": config.json, ")) << x.out;
  EXPECT_EQ(run("extract " + (d / "a.iris") + " config.json -o " + (d / "c.json") + " -q").out, "");
}

TEST(CliIdioms, ARepoIdMissingFromTheCacheIsAMissingInput) {
  TempDir cache;
  auto r = run_env("HF_HUB_CACHE=" + cache.path.string(), "convert org/not-downloaded -o " + (cache / "x.iris"));
  EXPECT_EQ(r.rc, 5) << r.out;  // as a path that does not exist
  EXPECT_TRUE(has(r.out, "`hf download org/not-downloaded` fetches it")) << r.out;
  auto rev = run_env("HF_HUB_CACHE=" + cache.path.string(), "convert org/not-downloaded@v2 -o " + (cache / "x.iris"));
  EXPECT_EQ(rev.rc, 5) << rev.out;
  EXPECT_TRUE(has(rev.out, "`hf download org/not-downloaded --revision v2` fetches it")) << rev.out;
}

// Long --rule/--skip lists in a TOML file (CLI11's config format), a command's options under
// its [name]: the plan is what the same options on the command line give.
TEST(CliIdioms, OptionsFileGivesWhatTheCommandLineGives) {
  TempDir d;
  write_bytes(d / "recipe.toml", "[convert]\nquant = \"nf4\"\nrule = ['^model\\.layers\\.0\\..*proj\\.weight$=mxfp4']\nskip = ['up_proj']\n");
  const std::string src = kFix + "llama-bf16";
  auto from_file = run_stdout("convert " + src + " -o " + (d / "a.iris") + " --dry-run --options-file " + (d / "recipe.toml"));
  auto from_line = run_stdout("convert " + src + " -o " + (d / "a.iris") + " --dry-run --quant nf4 --rule '^model\\.layers\\.0\\..*proj\\.weight$=mxfp4' --skip up_proj");
  ASSERT_EQ(from_file.rc, 0) << from_file.out;
  ASSERT_EQ(from_line.rc, 0) << from_line.out;
  EXPECT_EQ(from_file.out, from_line.out);
  EXPECT_TRUE(has(from_file.out, "-> mxfp4")) << from_file.out;
  EXPECT_TRUE(has(from_file.out, "--skip")) << from_file.out;
  // A misspelt key is an error naming it, never ignored; a missing file is a missing input.
  write_bytes(d / "typo.toml", "[convert]\nqaunt = \"nf4\"\n");
  auto typo = run("convert " + src + " -o " + (d / "b.iris") + " --options-file " + (d / "typo.toml"));
  EXPECT_EQ(typo.rc, 2);
  EXPECT_TRUE(has(typo.out, "--options-file: unknown key 'qaunt' under [convert]; did you mean 'quant'?")) << typo.out;
  auto missing = run("convert " + src + " -o " + (d / "b.iris") + " --options-file " + (d / "none.toml"));
  EXPECT_EQ(missing.rc, 5) << missing.out;
  EXPECT_FALSE(fs::exists(d / "b.iris"));
}

// verify's per-tensor limits take convert --rule's precedence: the first matching REGEX wins, a
// bare value covers what no REGEX matched.
TEST(CliIdioms, LimitOverridesTakeTheFirstMatchLikeRules) {
  std::vector<LimitOverride> o;
  for (const char* spec : {"0.5", "proj=0.2", "o_proj=0.3", "^lm_head=0.4"}) {
    auto l = parse_limit_override(spec, "--max-rel-l2");
    ASSERT_TRUE(l.is_ok()) << spec;
    o.push_back(*l);
  }
  EXPECT_EQ(limit_for(o, "model.layers.0.self_attn.o_proj.weight", 9), 0.2);  // "proj" comes first
  EXPECT_EQ(limit_for(o, "lm_head.weight", 9), 0.4);
  EXPECT_EQ(limit_for(o, "xlm_head.weight", 9), 0.5);  // ^ anchors; the bare value covers the rest
  EXPECT_EQ(limit_for({}, "anything", 9), 9);
}

// The progress bar fits the terminal: it never wraps (a wrapped line cannot be redrawn).
TEST(CliIdioms, ProgressLineFitsTheTerminal) {
  const uint64_t gb = 1000000000;
  const std::string wide = progress_line("convert", 3 * gb, 12 * gb, 2.0, 200);
  EXPECT_NE(wide.find("[" + std::string(7, '#') + std::string(23, '.') + "]"), std::string::npos) << wide;  // 25% of 30 cells
  EXPECT_NE(wide.find("25% 3.0 GB/12.0 GB 1.5 GB/s ETA 0m06s"), std::string::npos) << wide;
  for (int columns : {80, 60, 50, 40, 20, 1}) {
    const std::string line = progress_line("convert", 3 * gb, 12 * gb, 2.0, columns);
    EXPECT_LE(int(line.size()), columns - 1) << columns << ": '" << line << "'";
  }
  EXPECT_EQ(progress_line("convert", 0, 0, 0, 0).size() <= 79, true);  // unknown width: 80
  EXPECT_EQ(progress_line("convert", 3 * gb, 12 * gb, 2.0, 50).find('['), std::string::npos);  // no room: no bar
}

// Completion scripts and the man page come from the options themselves.
TEST(CliIdioms, BashCompletionCompletesCommandsAndEachCommandsOptions) {
  const std::string script = test_paths::iris_binary() + " completion bash";
  auto complete = [&](const std::string& words, int cword) {
    return run_shell("bash -c 'source <(" + script + ") && COMP_WORDS=(" + words + ") && COMP_CWORD=" + std::to_string(cword) +
                     " && _iris && echo \"${COMPREPLY[*]}\"' 2>&1");
  };
  auto cmd = complete("iris conv", 1);
  EXPECT_EQ(cmd.rc, 0) << cmd.out;
  EXPECT_EQ(cmd.out, "convert\n");
  auto opt = complete("iris convert x --qu", 3);
  EXPECT_EQ(opt.out, "--quant --quiet\n");
  opt = complete("iris convert x --qua", 3);
  EXPECT_EQ(opt.out, "--quant\n");
  auto verify = complete("iris verify x --max-rel", 3);
  EXPECT_EQ(verify.out, "--max-rel-l2\n");
  auto zsh = run_stdout("completion zsh");
  EXPECT_EQ(zsh.rc, 0);
  EXPECT_TRUE(has(zsh.out, "bashcompinit")) << zsh.out;
  EXPECT_EQ(run("completion fish").rc, 2);
}

TEST(CliIdioms, ManPageListsEveryCommandAndOption) {
  auto r = run_stdout("man");
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.out.rfind(".TH IRIS 1", 0), 0u) << r.out.substr(0, 200);
  for (const char* part : {".SS convert", ".SS verify", ".SS completion", "\\-\\-quant", "\\-\\-max\\-rel\\-l2", ".SH EXIT STATUS"})
    EXPECT_TRUE(has(r.out, part)) << part;
  // Every line that starts with '.' is a request the page means (text is escaped with \&).
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '.') {
      EXPECT_TRUE(line.rfind(".TH", 0) == 0 || line.rfind(".SH", 0) == 0 || line.rfind(".SS", 0) == 0 || line.rfind(".TP", 0) == 0 ||
                  line.rfind(".B ", 0) == 0 || line.rfind(".I ", 0) == 0 || line == ".PP" || line == ".nf" || line == ".fi")
          << line;
    }
}

}  // namespace
}  // namespace iris
