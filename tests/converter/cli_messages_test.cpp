// Messages and exit codes of issue 24 item 13: each says what is wrong, with the documented
// code, and --json failures always print a JSON object.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using testing_cli::run_stdout;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

// Without a usable GPU (or without CUDA) bench --json still prints its error object.
TEST(CliMessages, BenchJsonPrintsAnErrorObjectWithoutAGpu) {
  auto r = run_stdout("bench --json --synthetic nf4:64x64 --replays 1");
  if (r.rc == 0) GTEST_SKIP() << "a GPU is here: bench ran";
  EXPECT_EQ(r.rc, 6) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "stdout: '" << r.out << "'";
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["exit_code"], 6);
}

TEST(CliMessages, EmptyPathsAreUsageErrors) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  for (const std::string& args : {"export " + (d / "a.iris") + " -o ''", "extract " + (d / "a.iris") + " config.json -o ''",
                                  "convert " + kFix + "llama-bf16 -o ''", "convert " + kFix + "llama-bf16 -o " + (d / "b.iris") + " --report ''",
                                  "verify " + (d / "a.iris") + " --junit ''"}) {
    auto r = run(args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("the path is empty"), std::string::npos) << args << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(d / "b.iris"));
}

TEST(CliMessages, ConfigThatIsNotAJsonFileSaysWhy) {
  const std::string v1 = kFix + "v1/gptoss-mxfp4.v1.iris";
  TempDir d;
  auto dev = run("convert " + v1 + " -o " + (d / "a.iris") + " --config /dev/zero");
  EXPECT_EQ(dev.rc, 3) << dev.out;
  EXPECT_NE(dev.out.find("/dev/zero: not a regular file"), std::string::npos) << dev.out;
  const std::string shard = kFix + "llama-bf16/model-00001-of-00004.safetensors";
  auto bin = run("convert " + v1 + " -o " + (d / "a.iris") + " --config " + shard);
  EXPECT_EQ(bin.rc, 3) << bin.out;
  EXPECT_NE(bin.out.find("not a JSON text (binary data"), std::string::npos) << bin.out;
  EXPECT_EQ(bin.out.find("nested deeper"), std::string::npos) << bin.out;
  EXPECT_FALSE(fs::exists(d / "a.iris"));
}

TEST(CliMessages, MaxRssIsCheckedWithItsUnit) {
  TempDir d;
  auto tiny = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --max-rss 1");
  EXPECT_EQ(tiny.rc, 2) << tiny.out;
  EXPECT_NE(tiny.out.find("is 1 bytes, below"), std::string::npos) << tiny.out;
  EXPECT_EQ(tiny.out.find("0 MiB"), std::string::npos) << tiny.out;
  auto empty = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --max-rss '' --dry-run");
  EXPECT_EQ(empty.rc, 2) << empty.out;
  EXPECT_FALSE(fs::exists(d / "a.iris"));
}

// --dry-run --report writes the plan's report (the real run's shape, "dry_run": true) and no
// archive; the report file follows the usual rules (kept without --force).
TEST(CliMessages, DryRunWritesThePlannedReport) {
  TempDir d;
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --dry-run --report " + (d / "r.json") + " -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(d / "a.iris"));
  auto j = nlohmann::json::parse(read_all(d / "r.json"));
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["per_tensor"].size(), 21u);  // the fixture's 21 tensors
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --report " + (d / "real.json") + " -q").rc, 0);
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), fs::file_size(d / "a.iris"));  // what the real run then wrote
  EXPECT_FALSE(nlohmann::json::parse(read_all(d / "real.json")).contains("dry_run"));
  write_bytes(d / "keep.json", "mine");
  EXPECT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "b.iris") + " --dry-run --report " + (d / "keep.json") + " -q").rc, 2);
  EXPECT_EQ(read_all(d / "keep.json"), "mine");
}

}  // namespace
}  // namespace iris
