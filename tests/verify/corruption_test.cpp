// `iris verify` catches a flipped byte anywhere: exit 3 when the header or manifest no longer
// validates, exit 4 (naming tensor and component) when data no longer matches its checksum.
#include <gtest/gtest.h>

#include <filesystem>

#include <random>

#include "formats/iris_archive.h"
#include "verify/checksums.h"
#include "tests/test_paths.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
const std::string kFix = test_paths::fixtures();

struct Converted {
  TempDir d;
  std::string path, bytes;
  explicit Converted(const std::string& fixture) {
    path = d / "a.iris";
    auto r = run("convert " + kFix + fixture + " -o " + path + " -q");
    EXPECT_EQ(r.rc, 0) << r.out;
    bytes = read_all(path);
  }
  // Verifies a copy with byte `offset` flipped.
  testing_cli::Run verify_flipped(uint64_t offset) {
    std::string b = bytes;
    b[offset] = char(b[offset] ^ 0x10);
    write_bytes(d / "bad.iris", b);
    return run("verify " + (d / "bad.iris"));
  }
};

TEST(Verify, UntouchedArchivePasses) {
  Converted c("gptoss-mxfp4");
  auto r = run("verify " + c.path + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ok"], true);
}

TEST(Verify, HeaderAndManifestCorruptionIsInvalidInput) {
  Converted c("llama-nf4-dq");
  for (uint64_t off : {0ull, 9ull, 30ull, 50ull, 64ull, 200ull, 1000ull}) {
    auto r = c.verify_flipped(off);
    EXPECT_EQ(r.rc, 3) << "byte " << off << ": " << r.out;
  }
  std::string b = c.bytes;
  write_bytes(c.d / "short.iris", b.substr(0, b.size() - 1));
  EXPECT_EQ(run("verify " + (c.d / "short.iris")).rc, 3);
}

// One byte in the middle of each named component.
void expect_component_caught(const std::string& fixture, const std::string& tensor, const std::string& role) {
  Converted c(fixture);
  auto a = IrisArchive::open(c.path);
  ASSERT_TRUE(a.is_ok());
  const auto* t = a->find(tensor);
  ASSERT_NE(t, nullptr) << tensor;
  const auto* comp = t->component(*role_from_name(role));
  ASSERT_NE(comp, nullptr) << role;
  auto r = c.verify_flipped(a->absolute_offset(*comp) + comp->spec.bytes / 2);
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("FAIL " + tensor), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checksum:" + role), std::string::npos) << r.out;
}

// The bit-flip test: every bit of the preamble, and 300 random bits over the rest of the file
// (manifest, components, embedded files, padding), each flipped alone; opening the archive
// or verifying it must fail every time. In-process (the library's open + verify), so 800
// flips take seconds.
TEST(Verify, EveryFlippedBitIsDetected) {
  Converted c("gptoss-mxfp4");
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));  // printed with any failure, to replay it
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> bits;
  for (uint64_t b = 0; b < 64 * 8; ++b) bits.push_back(b);
  for (int i = 0; i < 300; ++i) bits.push_back(64 * 8 + rng() % ((c.bytes.size() - 64) * 8));
  int undetected = 0;
  for (uint64_t bit : bits) {
    std::string b = c.bytes;
    b[bit / 8] = char(b[bit / 8] ^ (1 << (bit % 8)));
    write_bytes(c.d / "flip.iris", b);
    auto a = IrisArchive::open(c.d / "flip.iris");
    if (!a.is_ok()) continue;  // header, manifest or a descriptor no longer validates
    VerifyReport report;
    verify_checksums(*a, &report, nullptr);
    if (report.ok() && ++undetected <= 5) ADD_FAILURE() << "bit " << bit << " (byte " << bit / 8 << ") flipped unnoticed";
  }
  EXPECT_EQ(undetected, 0) << "of " << bits.size() << " flips";
}

// Padding is checked: a flipped bit between components (not inside any) fails verify with
// exit 4, and a damaged magic is invalid input (3), not "unsupported".
TEST(Verify, FlippedPaddingAndBadMagic) {
  Converted c("llama-bf16");
  auto a = IrisArchive::open(c.path);
  ASSERT_TRUE(a.is_ok());
  uint64_t gap = 0;
  {
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (const auto& t : a->manifest().tensors)
      for (const auto& comp : t.components) used.push_back({a->absolute_offset(comp), a->absolute_offset(comp) + comp.spec.bytes});
    std::sort(used.begin(), used.end());
    for (size_t i = 0; i + 1 < used.size() && !gap; ++i)
      if (used[i + 1].first > used[i].second) gap = used[i].second;
  }
  ASSERT_GT(gap, 0u) << "no padding between components";
  auto r = c.verify_flipped(gap);
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("FAIL archive padding"), std::string::npos) << r.out;
  for (uint64_t off : {0ull, 7ull}) {
    auto m = c.verify_flipped(off);
    EXPECT_EQ(m.rc, 3) << "magic byte " << off << ": " << m.out;
  }
}

TEST(Verify, CatchesARawTensorByte) { expect_component_caught("llama-bf16", "model.layers.0.mlp.up_proj.weight", "data"); }
TEST(Verify, CatchesAnMxfp4CodesTileByte) { expect_component_caught("gptoss-mxfp4", "model.layers.1.mlp.experts.down_proj", "codes"); }
TEST(Verify, CatchesAnMxfp4ScalesByte) { expect_component_caught("gptoss-mxfp4", "model.layers.0.mlp.experts.gate_up_proj", "scales"); }
TEST(Verify, CatchesAnNf4AbsmaxByte) { expect_component_caught("llama-nf4-dq", "model.layers.0.self_attn.k_proj.weight", "absmax"); }
TEST(Verify, CatchesAnFp8ScalesByte) { expect_component_caught("llama-fp8-block", "model.layers.1.mlp.down_proj.weight", "scales"); }

TEST(Verify, CatchesAnEmbeddedFileByteAndReportsJson) {
  Converted c("llama-bf16");
  auto a = IrisArchive::open(c.path);
  ASSERT_TRUE(a.is_ok());
  ASSERT_FALSE(a->manifest().files.empty());
  const auto& f = a->manifest().files[0];
  std::string b = c.bytes;
  b[a->preamble().data_offset + f.offset + f.size / 2] ^= 0x01;
  write_bytes(c.d / "bad.iris", b);
  auto r = run("verify " + (c.d / "bad.iris") + " --json");
  EXPECT_EQ(r.rc, 4);
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["files"][0]["ok"], false);
}

TEST(Verify, DeviceCudaWithoutAGpuSaysSoWithItsOwnCode) {
  Converted c("llama-fp8-block");
  auto r = run("verify " + c.path + " --device cuda");
  if (r.rc == 0) GTEST_SKIP() << "a CUDA GPU device is present: the GPU checks ran and passed";
  EXPECT_EQ(r.rc, 6) << r.out;
  EXPECT_NE(r.out.find("--device cuda"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace iris
