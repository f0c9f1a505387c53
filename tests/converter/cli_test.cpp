// The `iris` command line end to end: every fixture round-trips, exit codes are the
// documented ones, and a failed or interrupted convert leaves nothing behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/float_bits.h"
#include "converter/sources/safetensors_file.h"
#include "converter/sources/safetensors_writer.h"
#include "converter/sources/snapshot.h"
#include "formats/iris_archive.h"
#include "tests/test_paths.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

size_t count_partials(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".partial-") != std::string::npos;
  return n;
}

// Whether process `pid` holds a descriptor of a file in `dir` (read from /proc/PID/fd).
bool writes_into(pid_t pid, const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code rl;
    const std::string target = fs::read_symlink(it->path(), rl).string();
    if (!rl && target.rfind(dir.string() + "/", 0) == 0 && target.find("/big/") == std::string::npos) return true;
  }
  return false;
}

class FixtureRoundTrip : public ::testing::TestWithParam<std::string> {};

// convert + export --dtype keep gives back every source tensor: names, dtypes, shapes, bytes.
TEST_P(FixtureRoundTrip, ConvertThenExportReproducesEverySourceTensor) {
  TempDir d;
  const std::string src = kFix + GetParam();
  auto c = run("convert " + src + " -o " + (d / "a.iris") + " -q");
  ASSERT_EQ(c.rc, 0) << c.out;
  auto v = run("verify " + (d / "a.iris"));
  ASSERT_EQ(v.rc, 0) << v.out;
  auto e = run("export " + (d / "a.iris") + " -o " + (d / "b.safetensors") + " -q");
  ASSERT_EQ(e.rc, 0) << e.out;
  auto snap = Snapshot::open(src);
  ASSERT_TRUE(snap.is_ok());
  auto back = SafetensorsFile::open(d / "b.safetensors");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->tensors().size(), snap->tensors().size());
  for (const auto& st : snap->tensors()) {
    const auto* t = back->find(st.tensor->name);
    ASSERT_NE(t, nullptr) << st.tensor->name;
    EXPECT_EQ(t->dtype, st.tensor->dtype) << t->name;
    EXPECT_EQ(t->shape, st.tensor->shape) << t->name;
    auto a = st.file->data(*st.tensor);
    auto b = back->data(*t);
    EXPECT_TRUE(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) << t->name << ": bytes differ";
  }
  EXPECT_EQ(count_partials(d.path), 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureRoundTrip, ::testing::Values("llama-bf16", "gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n;
                           for (char c : i.param) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(Cli, InspectJsonListsLogicalTensorsWithTheirParameters) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-nf4-dq -o " + (d / "a.iris") + " -q").rc, 0);
  auto r = run("inspect " + (d / "a.iris") + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["tensor_count"], 21);
  bool found = false;
  for (const auto& t : j["tensors"])
    if (t["name"] == "model.layers.1.mlp.up_proj.weight") {
      found = true;
      EXPECT_EQ(t["format"], "nf4");
      EXPECT_TRUE(t["params"].contains("nested_offset"));
      EXPECT_EQ(t["layout"]["kind"], "tiled");
    }
  EXPECT_TRUE(found);
  auto s = run("inspect " + kFix + "gptoss-mxfp4 --json");
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_EQ(nlohmann::json::parse(s.out)["formats"]["mxfp4"], 4);
}

TEST(Cli, ExportF32WidensBf16Exactly) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  ASSERT_EQ(run("export " + (d / "a.iris") + " -o " + (d / "f.safetensors") + " --dtype f32 -q").rc, 0);
  auto snap = Snapshot::open(kFix + "llama-bf16");
  auto f = SafetensorsFile::open(d / "f.safetensors");
  ASSERT_TRUE(f.is_ok());
  const auto* src = snap->find("model.layers.0.mlp.up_proj.weight");
  const auto* dst = f->find("model.layers.0.mlp.up_proj.weight");
  ASSERT_EQ(dst->dtype, DType::kF32);
  auto a = src->file->data(*src->tensor);
  auto b = f->data(*dst);
  for (uint64_t i = 0; i < src->tensor->numel; ++i) {
    uint16_t h;
    float x;
    std::memcpy(&h, a.data() + 2 * i, 2);
    std::memcpy(&x, b.data() + 4 * i, 4);
    ASSERT_EQ(f32_bits(x), uint32_t(h) << 16) << i;
  }
}

TEST(Cli, ExitCodes) {
  TempDir d;
  EXPECT_EQ(run("convert " + kFix + "llama-bf16").rc, 2);                       // missing -o
  EXPECT_EQ(run("frobnicate").rc, 2);                                            // unknown command
  EXPECT_EQ(run("export x.iris -o y --dtype f64").rc, 2);                        // bad option value
  EXPECT_EQ(run("convert " + (d / "nowhere") + " -o " + (d / "a.iris")).rc, 5);  // missing source: I/O, as in every command
  write_st(d / "bad/model.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "xxxxxxxx");
  auto r = run("convert " + (d / "bad") + " -o " + (d / "a.iris"));
  EXPECT_EQ(r.rc, 3);
  EXPECT_EQ(r.out.rfind("iris: error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("model.safetensors: tensor 'w'"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(run("verify " + (d / "bad/model.safetensors")).rc, 3);  // not an archive
  EXPECT_EQ(run("--help").rc, 0);
  EXPECT_NE(run("convert --help").out.find("Example"), std::string::npos);
}

TEST(Cli, ExistingOutputIsKeptWithoutForceAndReplacedWithIt) {
  TempDir d;
  write_bytes(d / "a.iris", "precious");
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("already exists"), std::string::npos);
  EXPECT_EQ(read_all(d / "a.iris"), "precious");
  EXPECT_EQ(count_partials(d.path), 0u);
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q --force").rc, 0);
  EXPECT_EQ(run("verify " + (d / "a.iris")).rc, 0);
}

TEST(Cli, FailedConvertLeavesNoFileBehind) {
  TempDir d;
  // A source whose second shard is truncated: found only after the first shard was read.
  fs::copy(kFix + "llama-bf16", d / "snap");
  const std::string shard = d / "snap/model-00003-of-00004.safetensors";
  fs::permissions(shard, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(shard, fs::file_size(shard) - 100);
  auto r = run("convert " + (d / "snap") + " -o " + (d / "out.iris"));
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_FALSE(fs::exists(d / "out.iris"));
  EXPECT_EQ(count_partials(d.path), 0u);
  // An output folder that does not exist.
  auto w = run("convert " + kFix + "llama-bf16 -o " + (d / "no/such/dir/out.iris"));
  EXPECT_EQ(w.rc, 5) << w.out;
}

TEST(Cli, InterruptedConvertLeavesNoPartialFile) {
  TempDir d;
  // 256 MiB of non-zero BF16 so that the conversion is still running when the signal lands.
  std::vector<SafetensorsEntry> entries;
  fs::create_directories(d / "big");
  for (int i = 0; i < 2; ++i)
    entries.push_back({"w" + std::to_string(i), DType::kBF16, {8192, 8192}, [](ByteSink& s) -> Status {
                         std::vector<uint8_t> chunk(1 << 20, 0x3c);
                         for (int j = 0; j < 128; ++j) IRIS_TRY(s.write(chunk));
                         return Status::ok();
                       }});
  SafetensorsWriteOptions o;
  ASSERT_TRUE(write_safetensors(d / "big/model.safetensors", std::move(entries), o).is_ok());
  const std::string binary = test_paths::iris_binary();  // before fork: the child only execs
  // SIGINT and SIGTERM are handled (the named partial is unlinked); SIGKILL cannot be, so
  // the archive is written to an unnamed file (O_TMPFILE) that vanishes with the process.
  for (int sig : {SIGINT, SIGTERM, SIGKILL}) {
    bool interrupted = false;
    // The conversion takes a few hundred milliseconds; should it ever finish before the
    // signal lands, try again sooner (a run that is never interrupted fails the test).
    for (int attempt = 0; attempt < 6 && !interrupted; ++attempt) {
      fs::remove(d / "out.iris");
      pid_t pid = fork();
      if (pid == 0) {
        execl(binary.c_str(), binary.c_str(), "convert", (d / "big").c_str(), "-o", (d / "out.iris").c_str(), "-q", (char*)nullptr);
        _exit(127);
      }
      // Interrupt once the child has its output open (a descriptor into this folder: the
      // unnamed O_TMPFILE or the named partial), so the signal lands mid-write.
      for (int i = 0; i < 2000 && !writes_into(pid, d.path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      kill(pid, sig);
      int status = 0;
      waitpid(pid, &status, 0);
      interrupted = WIFSIGNALED(status) && WTERMSIG(status) == sig;
    }
    EXPECT_TRUE(interrupted) << "signal " << sig << " never landed during a conversion";
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(d.path))
      if (e.path().filename() != "big") left.push_back(e.path().filename().string());
    EXPECT_TRUE(left.empty()) << "signal " << sig << " left " << left.size() << " files, the first " << (left.empty() ? "" : left[0]);
  }
}

// export hashes what it reads: a flipped byte inside a tile fails it with the verify exit code
// (4) and no output, in both the dequantizing and the original-form export.
TEST(Cli, ExportOfACorruptedArchiveFailsAndWritesNothing) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --quant mxfp4 -q").rc, 0);
  uint64_t at = 0;
  {
    auto a = IrisArchive::open(d / "a.iris");
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    for (const auto& t : a->manifest().tensors)
      if (t.desc.format == Format::kMxfp4) {
        at = a->absolute_offset(t.components[0]) + t.components[0].spec.bytes / 2;
        break;
      }
  }
  ASSERT_GT(at, 0u);
  std::string bytes = read_all(d / "a.iris");
  bytes[at] ^= 0x10;
  write_bytes(d / "bad.iris", bytes);
  for (const char* dtype : {"bf16", "keep"}) {
    auto r = run("export " + (d / "bad.iris") + " -o " + (d / "out.safetensors") + " --dtype " + dtype + " -q");
    EXPECT_EQ(r.rc, 4) << dtype << ": " << r.out;
    EXPECT_NE(r.out.find("checksum mismatch"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d / "out.safetensors"));
  }
  EXPECT_EQ(run("export " + (d / "a.iris") + " -o " + (d / "out.safetensors") + " -q").rc, 0);
}

// Reproducible archives: two copies of a snapshot at different paths, one given relative and
// one absolute, convert (plain and requantized) to byte-identical archives.
TEST(Cli, SameInputBytesGiveTheSameArchiveFromAnyPath) {
  TempDir d;
  fs::copy(kFix + "llama-nf4-dq", d / "first");
  fs::create_directories(d / "deep/er");
  fs::copy(kFix + "llama-nf4-dq", d / "deep/er/second-copy");
  for (const char* quant : {"keep", "mxfp4"}) {
    ASSERT_EQ(run("convert " + (d / "first") + " -o " + (d / "a.iris") + " --quant " + quant + " -q --force").rc, 0);
    const std::string rel = fs::relative(d / "deep/er/second-copy").string();
    ASSERT_EQ(run("convert " + rel + " -o " + (d / "b.iris") + " --quant " + quant + " -q --force").rc, 0);
    EXPECT_TRUE(read_all(d / "a.iris") == read_all(d / "b.iris")) << quant << ": the archives differ";
  }
}

// A named partial of a process that no longer exists (a SIGKILLed run on a filesystem without
// O_TMPFILE) is removed by the next write to the same name; a live process's is kept.
TEST(Cli, StalePartialsOfDeadProcessesAreRemoved) {
  TempDir d;
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // its PID is now unused (reuse within the test is vanishingly rare)
  const std::string dead = d / ("a.iris.partial-" + std::to_string(child) + "-Ab12Cd");
  const std::string live = d / ("a.iris.partial-" + std::to_string(getpid()) + "-Zz98Yy");
  const std::string other = d / "a.iris.partial-notours";
  for (const auto& p : {dead, live, other}) write_bytes(p, "x");
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " -q").rc, 0);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}

// An output or a report that is, or links to, a source file is refused even with --force,
// and the source is untouched.
TEST(Cli, OutputsNeverReplaceAnInput) {
  TempDir d;
  fs::copy(kFix + "llama-bf16", d / "snap");
  const std::string shard = d / "snap/model-00001-of-00004.safetensors";
  const std::string before = read_all(shard);
  fs::create_symlink(shard, d / "link.iris");
  fs::create_hard_link(shard, d / "hard.iris");
  for (const std::string& out : {shard, d / "link.iris", d / "hard.iris"}) {
    auto r = run("convert " + (d / "snap") + " -o " + out + " --force -q");
    EXPECT_EQ(r.rc, 2) << out << ": " << r.out;
    EXPECT_NE(r.out.find("refusing to replace it"), std::string::npos) << r.out;
  }
  auto rep = run("convert " + (d / "snap") + " -o " + (d / "a.iris") + " --report " + (d / "snap/config.json") + " --force -q");
  EXPECT_EQ(rep.rc, 2) << rep.out;
  EXPECT_FALSE(fs::exists(d / "a.iris"));
  EXPECT_EQ(read_all(shard), before);
  EXPECT_TRUE(fs::is_symlink(d / "link.iris"));
  ASSERT_EQ(run("convert " + (d / "snap") + " -o " + (d / "a.iris") + " -q").rc, 0);
  auto e = run("export " + (d / "a.iris") + " -o " + (d / "a.iris") + " --force -q");
  EXPECT_EQ(e.rc, 2) << e.out;
  EXPECT_EQ(run("verify " + (d / "a.iris")).rc, 0);
}

// --report: an existing file is kept without --force and no archive is written; a report that
// cannot be written leaves no archive; a written one is complete JSON.
TEST(Cli, ReportIsCheckedBeforeTheArchiveAndWrittenAtomically) {
  TempDir d;
  write_bytes(d / "r.json", "keep me");
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --report " + (d / "r.json") + " -q");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(read_all(d / "r.json"), "keep me");
  EXPECT_FALSE(fs::exists(d / "a.iris"));
  auto nowhere = run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --report " + (d / "no/dir/r.json") + " -q");
  EXPECT_EQ(nowhere.rc, 5) << nowhere.out;
  EXPECT_FALSE(fs::exists(d / "a.iris"));
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "a.iris") + " --report " + (d / "r.json") + " --force -q").rc, 0);
  auto j = nlohmann::json::parse(read_all(d / "r.json"));
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), fs::file_size(d / "a.iris"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.path)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names.size(), 2u);  // a.iris and r.json, no partials
}

TEST(Cli, RepoIdFromTheHfCacheConvertsEndToEnd) {
  TempDir d;
  const std::string commit = "89abcdef0123456789abcdef0123456789abcdef";
  const std::string snap = d / ("models--tiny--llama/snapshots/" + commit);
  fs::create_directories(snap);
  for (const auto& e : fs::directory_iterator(kFix + "llama-bf16")) fs::copy(e.path(), snap + "/" + e.path().filename().string());
  write_bytes(d / "models--tiny--llama/refs/main", commit);
  // popen runs through the shell, so the cache is given in the environment of the command.
  auto r = testing_cli::run_env("HF_HUB_CACHE=" + d.path.string(), "convert tiny/llama -o " + (d / "t.iris") + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(r.out.find('{')))["tensors"], 21);
}

}  // namespace
}  // namespace iris
