// `export -o DIR/` into a folder that exists (issue 24 items 8 and 13): once, with --force, DIR
// was replaced whole, the archive being exported and every other file in it deleted, and a new
// DIR was mode 0700 (mkdtemp). Now a DIR that is or holds an input is refused, --force replaces
// only the files the export writes, weights it would not replace are refused (transformers
// would load them), and a new DIR is 0755 (files 0644) less the umask.
#include <gtest/gtest.h>
#include <sys/stat.h>

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

TEST(ExportFolderForce, AFolderThatIsOrHoldsTheInputIsRefused) {
  TempDir d;
  fs::create_directories(d / "m/sub");
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "m/a.iris") + " -q").rc, 0);
  const std::string before = read_all(d / "m/a.iris");
  fs::create_symlink(d / "m", d / "link");
  fs::create_symlink(d / "m/a.iris", d / "elsewhere.iris");
  for (const std::string& out : {d / "m/", d / "m", d / "m/sub/../", d / "link/"}) {
    auto r = run("export " + (d / "m/a.iris") + " -o " + out + " --force -q");
    EXPECT_EQ(r.rc, 2) << out << ": " << r.out;
    EXPECT_NE(r.out.find("holds the input"), std::string::npos) << r.out;
  }
  // The archive named through a link into the folder.
  auto r = run("export " + (d / "elsewhere.iris") + " -o " + (d / "m/") + " --force -q");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(names_in(d / "m"), (std::vector<std::string>{"a.iris", "sub"}));
  EXPECT_TRUE(read_all(d / "m/a.iris") == before);
}

TEST(ExportFolderForce, OnlyTheFilesTheExportWritesAreReplaced) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  write_bytes(d / "out/README.md", "mine");
  write_bytes(d / "out/config.json", "{\"old\": true}");
  write_bytes(d / "out/notes/keep.txt", "also mine");
  auto without = run("export " + (d / "a.iris") + " -o " + (d / "out/") + " -q");
  EXPECT_EQ(without.rc, 2) << without.out;
  EXPECT_EQ(read_all(d / "out/config.json"), "{\"old\": true}");
  auto r = run("export " + (d / "a.iris") + " -o " + (d / "out/") + " --force -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(read_all(d / "out/README.md"), "mine");
  EXPECT_EQ(read_all(d / "out/notes/keep.txt"), "also mine");
  EXPECT_NE(read_all(d / "out/config.json").find("\"llama\""), std::string::npos);
  EXPECT_EQ(names_in(d / "out"), (std::vector<std::string>{"README.md", "config.json", "generation_config.json", "model.safetensors", "notes"}));
  EXPECT_EQ(names_in(d.path), (std::vector<std::string>{"a.iris", "out"}));  // no temporary left beside it
  // The folder converts back to the archive's tensors.
  EXPECT_EQ(run("convert " + (d / "out") + " -o " + (d / "b.iris") + " -q").rc, 0);
}

// Weights the export would not write stay, but transformers would load them: refused, nothing
// changed. (A single model.safetensors beside new shards would even be loaded instead.)
TEST(ExportFolderForce, WeightsTheExportWouldNotReplaceAreRefused) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  write_bytes(d / "out/model-00001-of-00009.safetensors", "old shard");
  write_bytes(d / "out/config.json", "old config");
  auto r = run("export " + (d / "a.iris") + " -o " + (d / "out/") + " --force -q");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("model-00001-of-00009.safetensors"), std::string::npos) << r.out;
  EXPECT_EQ(read_all(d / "out/config.json"), "old config");
  EXPECT_EQ(names_in(d / "out"), (std::vector<std::string>{"config.json", "model-00001-of-00009.safetensors"}));
}

// A new folder is readable by others as any tool would write it: 0755 and 0644 less the umask.
TEST(ExportFolderForce, ANewFolderHasTheUsualModes) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  for (const auto& [mask, dir_mode, file_mode] : {std::tuple{"022", 0755, 0644}, std::tuple{"027", 0750, 0640}}) {
    const std::string out = d / ("out" + std::string(mask));
    auto r = testing_cli::run_env(std::string("umask ") + mask + ";", "export " + (d / "a.iris") + " -o " + out + "/ -q");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(int(fs::status(out).permissions() & fs::perms::all), dir_mode) << mask;
    for (const auto& e : fs::directory_iterator(out))
      EXPECT_EQ(int(e.status().permissions() & fs::perms::all), file_mode) << mask << " " << e.path();
  }
}

}  // namespace
}  // namespace iris
