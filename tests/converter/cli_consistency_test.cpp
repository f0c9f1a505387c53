// The command line speaks one language: option errors are one line with iris's prefix and
// the closest valid choice, and a missing input has the same message and exit code (5, an
// I/O error, as the C API's IRIS_ERR_IO) in every command.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using testing_cli::run;

TEST(CliConsistency, OptionErrorsAreOneLineAndSuggestTheClosestChoice) {
  const std::string fix = test_paths::fixtures() + "llama-bf16";
  const struct {
    std::string args, says;
  } cases[] = {{"convert " + fix + " -o /tmp/never.iris --quant NF4", "did you mean 'nf4'?"},
               {"convert " + fix + " -o /tmp/never.iris --quant mxpf4", "did you mean 'mxfp4'?"},
               {"export x.iris -o y.safetensors --dtype F32", "did you mean 'f32'?"},
               {"verify x.iris --device gpu", "'gpu' is not one of cpu, cuda"},
               {"convert " + fix, "--output is required"}};
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("iris: error: ", 0), 0u) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << ": " << r.out;
  }
  // No suggestion when nothing is close.
  auto r = run("convert " + fix + " -o /tmp/never.iris --quant q4_k_m");
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
}

TEST(CliConsistency, AMissingInputIsExit5EverywhereWithOneMessage) {
  const std::string gone = ::testing::TempDir() + "/no_such_input";
  for (const std::string& args : {"inspect " + gone, "verify " + gone, "export " + gone + " -o " + gone + ".st",
                                  "convert " + gone + " -o " + gone + ".iris", "diff " + gone + " " + gone}) {
    auto r = run(args);
    EXPECT_EQ(r.rc, 5) << args << ": " << r.out;
    EXPECT_NE(r.out.find(gone + ": no such file or folder"), std::string::npos) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace iris

namespace iris {
namespace {

// `iris extract`: an embedded file comes out byte for byte as the snapshot had it, to a file
// or standard output; an unknown name lists what the archive holds; nothing is overwritten
// without --force.
TEST(Extract, EmbeddedFilesComeOutAsTheSnapshotHadThem) {
  testing_files::TempDir d;
  const std::string dir = d.path.string();
  const std::string snap = test_paths::fixtures() + "llama-bf16";
  auto r = run("convert -q " + snap + " -o " + dir + "/a.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  using testing_files::read_all;
  r = run("extract " + dir + "/a.iris config.json -o " + dir + "/config.json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(read_all(dir + "/config.json"), read_all(snap + "/config.json"));
  r = run("extract " + dir + "/a.iris config.json -o -");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, read_all(snap + "/config.json"));
  r = run("extract " + dir + "/a.iris config.json -o " + dir + "/config.json");
  EXPECT_EQ(r.rc, 2) << "exists without --force: " << r.out;
  r = run("extract " + dir + "/a.iris nope.json -o " + dir + "/nope.json");
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("no embedded file 'nope.json' (it holds config.json"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/nope.json"));
}

}  // namespace
}  // namespace iris

namespace iris {
namespace {

// Waiting OpenMP threads sleep by default (issue 24 item 6): with OMP_WAIT_POLICY unset the
// CLI starts again with it set to passive before libgomp reads it; a policy the user set is
// kept. `--version` states the policy the process runs with.
TEST(WaitPolicy, PassiveUnlessTheUserChoseOne) {
  auto unset = testing_cli::run_env("env -u OMP_WAIT_POLICY", "--version");
  EXPECT_EQ(unset.rc, 0) << unset.out;
  EXPECT_NE(unset.out.find("waiting threads passive"), std::string::npos) << unset.out;
  auto active = testing_cli::run_env("OMP_WAIT_POLICY=active", "--version");
  EXPECT_NE(active.out.find("waiting threads active"), std::string::npos) << active.out;
}

// --threads N: the same archive with one thread as with the default, and a negative count is
// a usage error.
TEST(Threads, OneThreadWritesTheSameArchiveAndNegativeIsAUsageError) {
  testing_files::TempDir d;
  const std::string src = test_paths::fixtures() + "/llama-bf16";
  ASSERT_EQ(testing_cli::run("convert " + src + " -o " + d / "a.iris --quant nf4 -q").rc, 0);
  auto one = testing_cli::run("convert " + src + " -o " + d / "b.iris --quant nf4 -q --threads 1");
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_EQ(testing_files::read_all(d / "a.iris"), testing_files::read_all(d / "b.iris"));
  auto bad = testing_cli::run("convert " + src + " -o " + d / "c.iris -q --threads -2");
  EXPECT_EQ(bad.rc, 2) << bad.out;
}

}  // namespace
}  // namespace iris
