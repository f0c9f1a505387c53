// A .iris v2 archive as a convert source: the same tensors as converting the snapshot it was
// made from (an MXFP4 source requantized to NF4 and FP8; a lossless copy keeps every byte),
// provenance saying so, and a damaged archive refused in one line with nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

// The archive's tensors as one safetensors file (export --dtype keep: bytes as stored).
std::string tensors_of(const TempDir& d, const std::string& archive) {
  const std::string out = d / (fs::path(archive).filename().string() + ".safetensors");
  EXPECT_EQ(run("export " + archive + " -o " + out + " -q").rc, 0) << archive;
  return read_all(out);
}

TEST(ArchiveSource, ConvertingAnArchiveEqualsConvertingItsSnapshot) {
  for (const std::string fixture : {"gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"}) {
    TempDir d;
    ASSERT_EQ(run("convert " + kFix + fixture + " -o " + (d / "a.iris") + " -q").rc, 0) << fixture;
    for (const std::string quant : {"keep", "nf4", "fp8-block", "mxfp4"}) {
      SCOPED_TRACE(fixture + " --quant " + quant);
      auto from_archive = run("convert " + (d / "a.iris") + " -o " + (d / ("x-" + quant + ".iris")) + " -q --quant " + quant);
      ASSERT_EQ(from_archive.rc, 0) << from_archive.out;
      ASSERT_EQ(run("convert " + kFix + fixture + " -o " + (d / ("y-" + quant + ".iris")) + " -q --quant " + quant).rc, 0);
      EXPECT_TRUE(tensors_of(d, d / ("x-" + quant + ".iris")) == tensors_of(d, d / ("y-" + quant + ".iris")));
    }
    const auto j = nlohmann::json::parse(run("inspect " + (d / "x-nf4.iris") + " --json").out);
    EXPECT_EQ(j["provenance"]["source"]["kind"], "iris-archive");
    // Nothing of the intermediate folder is left beside the outputs.
    for (const auto& e : fs::directory_iterator(d.path)) EXPECT_EQ(e.path().string().find(".partial-"), std::string::npos) << e.path();
  }
}

TEST(ArchiveSource, ADamagedArchiveIsRefusedInOneLineLeavingNothing) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  std::string bytes = read_all(d / "a.iris");
  bytes[bytes.size() - 100] ^= 0x40;  // inside the last tensor's data: its checksum fails
  write_bytes(d / "bad.iris", bytes);
  write_bytes(d / "broken.iris", std::string("IRISMDL2", 8) + std::string(56, '\0'));  // a preamble and nothing else
  for (const std::string src : {"bad.iris", "broken.iris"}) {
    auto r = run("convert " + (d / src) + " -o " + (d / "out.iris") + " --quant nf4");
    EXPECT_NE(r.rc, 0) << src;
    EXPECT_NE(r.out.find(src), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line: " << r.out;
    EXPECT_FALSE(fs::exists(d / "out.iris")) << src;
    for (const auto& e : fs::directory_iterator(d.path)) EXPECT_EQ(e.path().string().find(".partial-"), std::string::npos) << e.path();
  }
  EXPECT_EQ(run("convert " + (d / "a.iris") + " -o " + (d / "a.iris") + " --quant nf4").rc, 2);  // the source as the output
  EXPECT_EQ(read_all(d / "a.iris").size(), bytes.size());
}

}  // namespace
}  // namespace iris
