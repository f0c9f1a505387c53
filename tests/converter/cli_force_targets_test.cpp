// `--force` replaces regular files only (issue 24 item 7). A symbolic link at the destination
// is followed (its target gets the new contents, the link stays); a character device or FIFO
// is written through, or refused by outputs that cannot be streamed (archives); nothing but
// the named file is touched. Once, `convert -o /dev/null --force` run as root replaced
// /dev/null with a regular file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

bool is_fifo(const std::string& p) { return fs::status(p).type() == fs::file_type::fifo; }

// Runs `iris ARGS` while a separate process (cat, killed after 30 s should iris never open the
// FIFO) copies what arrives in `fifo` to `got`; returns iris's exit code.
int run_with_reader(const std::string& fifo, const std::string& got, const std::string& args) {
  const std::string cmd = "timeout 30 cat '" + fifo + "' > '" + got + "' & " + test_paths::iris_binary() + " " + args +
                          " >/dev/null 2>&1; rc=$?; wait; exit $rc";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ForceTargets : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(d / "in");
    ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "in/a.iris") + " -q").rc, 0);
  }
  TempDir d;
  std::string archive() const { return d / "in/a.iris"; }
};

TEST_F(ForceTargets, AFifoIsWrittenThroughByStreamingOutputs) {
  fs::create_directories(d / "out");
  ASSERT_EQ(mkfifo((d / "out/p").c_str(), 0644), 0);
  // What each command writes into a regular file, for comparison.
  ASSERT_EQ(run("extract " + archive() + " config.json -o " + (d / "config.json")).rc, 0);
  ASSERT_EQ(run("export " + archive() + " -o " + (d / "m.safetensors") + " -q").rc, 0);
  struct Case {
    std::string args, same_as;
  };
  for (const Case& c : {Case{"extract " + archive() + " config.json -o " + (d / "out/p") + " --force", d / "config.json"},
                        Case{"export " + archive() + " -o " + (d / "out/p") + " --force -q", d / "m.safetensors"}}) {
    EXPECT_EQ(run_with_reader(d / "out/p", d / "got", c.args), 0) << c.args;
    EXPECT_TRUE(read_all(d / "got") == read_all(c.same_as)) << c.args << ": the reader got other bytes";
    EXPECT_TRUE(is_fifo(d / "out/p")) << c.args << ": the FIFO was replaced";
    EXPECT_EQ(names_in(d / "out"), std::vector<std::string>{"p"}) << c.args;
  }
  // Reports: convert --report, verify --junit.
  EXPECT_EQ(run_with_reader(d / "out/p", d / "got", "convert " + kFix + "llama-bf16 -o " + (d / "b.iris") + " --report " + (d / "out/p") + " --force -q"), 0);
  EXPECT_NE(read_all(d / "got").find("\"per_tensor\""), std::string::npos) << read_all(d / "got");
  EXPECT_EQ(run_with_reader(d / "out/p", d / "got", "verify " + archive() + " --junit " + (d / "out/p") + " --force -q"), 0);
  EXPECT_NE(read_all(d / "got").find("<testsuites"), std::string::npos) << read_all(d / "got");
  EXPECT_TRUE(is_fifo(d / "out/p"));
  EXPECT_EQ(names_in(d / "out"), std::vector<std::string>{"p"});
}

// An archive's header goes in last and is read back: a FIFO is refused, before any work, and
// stays a FIFO (no reader is started: a hang here means iris opened it).
TEST_F(ForceTargets, AnArchiveIsNotWrittenIntoAFifo) {
  fs::create_directories(d / "out");
  ASSERT_EQ(mkfifo((d / "out/p").c_str(), 0644), 0);
  for (const std::string& src : {kFix + "llama-bf16", archive()}) {  // a snapshot source and an archive source
    auto r = run("convert " + src + " -o " + (d / "out/p") + " --force -q");
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("is a FIFO"), std::string::npos) << r.out;
    EXPECT_TRUE(is_fifo(d / "out/p"));
    EXPECT_EQ(names_in(d / "out"), std::vector<std::string>{"p"});
  }
}

// A link to a file in another folder: the target gets the new contents (a rename in the
// target's folder), the link stays as it was; a link to nothing is refused.
TEST_F(ForceTargets, ASymbolicLinkIsFollowedNeverReplaced) {
  fs::create_directories(d / "real");
  fs::create_directories(d / "links");
  for (const char* n : {"a.iris", "r.json", "c.json", "m.safetensors", "j.xml"}) {
    write_bytes(d / ("real/" + std::string(n)), "old");
    fs::create_symlink("../real/" + std::string(n), d / ("links/" + std::string(n)));
  }
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "links/a.iris") + " --report " + (d / "links/r.json") + " --force -q").rc, 0);
  ASSERT_EQ(run("extract " + archive() + " config.json -o " + (d / "links/c.json") + " --force").rc, 0);
  ASSERT_EQ(run("export " + archive() + " -o " + (d / "links/m.safetensors") + " --force -q").rc, 0);
  ASSERT_EQ(run("verify " + archive() + " --junit " + (d / "links/j.xml") + " --force -q").rc, 0);
  EXPECT_EQ(run("verify " + (d / "real/a.iris") + " -q").rc, 0);
  EXPECT_NE(read_all(d / "real/r.json").find("\"per_tensor\""), std::string::npos);
  EXPECT_NE(read_all(d / "real/c.json").find("\"llama\""), std::string::npos) << read_all(d / "real/c.json");
  EXPECT_NE(read_all(d / "real/m.safetensors"), "old");
  EXPECT_NE(read_all(d / "real/j.xml").find("<testsuites"), std::string::npos);
  for (const char* n : {"a.iris", "r.json", "c.json", "m.safetensors", "j.xml"}) {
    EXPECT_TRUE(fs::is_symlink(d / ("links/" + std::string(n)))) << n << ": the link was replaced";
    EXPECT_EQ(fs::read_symlink(d / ("links/" + std::string(n))), "../real/" + std::string(n));
  }
  EXPECT_EQ(names_in(d / "real"), (std::vector<std::string>{"a.iris", "c.json", "j.xml", "m.safetensors", "r.json"}));
  EXPECT_EQ(names_in(d / "links"), (std::vector<std::string>{"a.iris", "c.json", "j.xml", "m.safetensors", "r.json"}));

  fs::create_symlink("../real/nothing", d / "links/dangling.json");
  auto r = run("extract " + archive() + " config.json -o " + (d / "links/dangling.json") + " --force");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("symbolic link to nothing"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "real/nothing"));
  EXPECT_TRUE(fs::is_symlink(d / "links/dangling.json"));
}

// A character device: a node like /dev/null (major 1, minor 3) made in the test's own folder
// (root only), so a regression cannot replace the machine's /dev/null. Streaming outputs write
// through it; an archive is refused; the node stays a device and nothing appears beside it.
TEST_F(ForceTargets, ACharacterDeviceIsWrittenThroughOrRefused) {
  fs::create_directories(d / "dev");
  const std::string null = d / "dev/null";
  // The suite runs as root (CI does): making the node is part of the test, not optional.
  ASSERT_EQ(mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << "mknod needs root: " << std::strerror(errno);
  {
    FILE* f = std::fopen(null.c_str(), "w");
    ASSERT_NE(f, nullptr) << "the device node cannot be opened (a nodev mount?)";
    std::fclose(f);
  }
  auto is_chr = [&] { return fs::status(null).type() == fs::file_type::character; };
  for (const std::string& args : {"extract " + archive() + " config.json -o " + null + " --force",
                                  "export " + archive() + " -o " + null + " --force -q",
                                  "verify " + archive() + " --junit " + null + " --force -q",
                                  "convert " + kFix + "llama-bf16 -o " + (d / "b.iris") + " --report " + null + " --force -q"}) {
    auto r = run(args);
    EXPECT_EQ(r.rc, 0) << args << ": " << r.out;
    EXPECT_TRUE(is_chr()) << args << ": the device was replaced";
  }
  auto c = run("convert " + kFix + "llama-bf16 -o " + null + " --force -q");
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_NE(c.out.find("is a character device"), std::string::npos) << c.out;
  EXPECT_TRUE(is_chr());
  EXPECT_EQ(names_in(d / "dev"), std::vector<std::string>{"null"});
}

// The machine's own /dev/null (writable by anyone on Linux): written through by extract.
// Only the streaming case: an archive there is covered on a node of the test's own above.
TEST_F(ForceTargets, DevNullIsWrittenThrough) {
  ASSERT_EQ(access("/dev/null", W_OK), 0);
  auto r = run("extract " + archive() + " config.json -o /dev/null --force");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(fs::status("/dev/null").type(), fs::file_type::character);
}

}  // namespace
}  // namespace iris
