// A snapshot with more shards than the process may hold open files (issue 24 item 11): every
// command that reads it -- convert (lossless and requantizing), inspect, verify --against, and
// the folder export and archive-as-source paths that write and read many shards again -- works
// under a soft RLIMIT_NOFILE of 64, and gives the same archive bytes as without the limit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using testing_cli::run_env;
namespace fs = std::filesystem;

constexpr int kShards = 200;      // far more than the limit below, and than the shard readers' cache
constexpr int kFileLimit = 64;    // the soft limit the limited runs get (a shell's `ulimit -Sn`)
constexpr int kRows = 64, kCols = 128;  // fits MXFP4's 32-wide and FP8-block's 128x128 blocks

// One BF16 [64, 128] weight per shard, listed in model.safetensors.index.json.
void write_many_shard_snapshot(const std::string& dir) {
  nlohmann::json weight_map = nlohmann::json::object();
  for (int s = 0; s < kShards; ++s) {
    char shard[64];
    std::snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, kShards);
    const std::string name = "model.layers." + std::to_string(s) + ".mlp.down_proj.weight";
    std::string data(size_t(kRows) * kCols * 2, '\0');
    for (int i = 0; i < kRows * kCols; ++i) {
      const float v = 0.05f * std::sin(0.37f * float(i) + float(s));
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const uint16_t h = uint16_t(bits >> 16);
      std::memcpy(data.data() + 2 * i, &h, 2);
    }
    const std::string header = nlohmann::json{{name, {{"dtype", "BF16"}, {"shape", {kRows, kCols}},
                                                      {"data_offsets", {0, data.size()}}}}}.dump();
    write_st(dir + "/" + shard, header, data);
    weight_map[name] = shard;
  }
  write_bytes(dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
  write_bytes(dir + "/config.json", R"({"model_type": "llama", "torch_dtype": "bfloat16"})");
}

// `iris ARGS` with the soft open-file limit lowered first (the shell's, inherited by iris).
testing_cli::Run limited(const std::string& args) {
  return run_env("ulimit -Sn " + std::to_string(kFileLimit) + ";", args);
}

TEST(ManyShards, EveryCommandWorksWithMoreShardsThanOpenFiles) {
  TempDir d;
  const std::string snap = d / "snap";
  write_many_shard_snapshot(snap);
  for (const std::string quant : {"keep", "mxfp4", "fp8-block"}) {
    SCOPED_TRACE("--quant " + quant);
    const std::string free_out = d / ("free-" + quant + ".iris"), lim_out = d / ("lim-" + quant + ".iris");
    auto f = run("convert " + snap + " -o " + free_out + " -q --quant " + quant);
    ASSERT_EQ(f.rc, 0) << f.out;
    auto c = limited("convert " + snap + " -o " + lim_out + " -q --quant " + quant);
    ASSERT_EQ(c.rc, 0) << c.out;
    EXPECT_TRUE(read_all(lim_out) == read_all(free_out)) << "the limited run wrote other bytes";
    auto v = limited("verify " + lim_out + " --against " + snap + " -q");
    EXPECT_EQ(v.rc, 0) << v.out;
  }
  auto i = limited("inspect " + snap + " --json");
  ASSERT_EQ(i.rc, 0) << i.out;
  EXPECT_EQ(nlohmann::json::parse(i.out)["tensor_count"], kShards);
  EXPECT_EQ(limited("inspect " + (d / "lim-keep.iris")).rc, 0);

  // Export to a folder of one shard per tensor, then read those shards back: as a snapshot,
  // and through the archive-as-source path (which exports to a folder and converts it).
  auto e = limited("export " + (d / "lim-keep.iris") + " -o " + (d / "exported") + "/ --max-shard-size 16KiB -q");
  ASSERT_EQ(e.rc, 0) << e.out;
  size_t shards = 0;
  for (const auto& p : fs::directory_iterator(d / "exported")) shards += p.path().extension() == ".safetensors";
  EXPECT_EQ(shards, size_t(kShards));
  auto back = limited("verify " + (d / "lim-keep.iris") + " --against " + (d / "exported") + " -q");
  EXPECT_EQ(back.rc, 0) << back.out;
  auto a = limited("convert " + (d / "lim-keep.iris") + " -o " + (d / "from-archive.iris") + " -q --quant mxfp4");
  ASSERT_EQ(a.rc, 0) << a.out;
  auto av = limited("verify " + (d / "from-archive.iris") + " --against " + snap + " -q");
  EXPECT_EQ(av.rc, 0) << av.out;
}

// The limit is real: the shell lowers it for iris, which a test that passes anyway would hide.
TEST(ManyShards, TheLimitReachesTheCommand) {
  auto r = run_env("ulimit -Sn " + std::to_string(kFileLimit) + "; ulimit -Sn; true", "");
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), std::to_string(kFileLimit)) << r.out;
}

}  // namespace
}  // namespace iris
