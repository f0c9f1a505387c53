// Snapshots that must open: every fixture, HF cache repo ids, unusual but valid files.
#include <gtest/gtest.h>

#include <cstdlib>

#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "tests/test_paths.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
const std::string kFix = test_paths::fixtures();

std::vector<SourceTensor> group(const std::string& src) {
  auto s = Snapshot::open(src);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  static std::vector<std::unique_ptr<Snapshot>> keep;  // tensors point into the snapshot
  keep.push_back(std::make_unique<Snapshot>(std::move(s).value()));
  auto g = group_source_tensors(*keep.back());
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(g).value();
}

const SourceTensor* find(const std::vector<SourceTensor>& v, const std::string& name) {
  for (const auto& t : v)
    if (t.desc.name == name) return &t;
  return nullptr;
}

TEST(Snapshot, LlamaBf16ShardsResolveThroughTheIndex) {
  auto s = Snapshot::open(kFix + "llama-bf16");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->shards().size(), 4u);
  EXPECT_EQ(s->tensors().size(), 21u);
  EXPECT_EQ(s->config().model_type, "llama");
  bool has_config = false;
  for (const auto& f : s->aux_files()) has_config |= f.name == "config.json";
  EXPECT_TRUE(has_config);
}

TEST(Snapshot, GptOssExpertsBecomeOneMxfp4TensorEach) {
  auto g = group(kFix + "gptoss-mxfp4");
  const auto* t = find(g, "model.layers.0.mlp.experts.gate_up_proj");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->desc.format, Format::kMxfp4);
  EXPECT_EQ(t->desc.shape, (std::vector<uint64_t>{4, 512, 256}));
  EXPECT_EQ(find(g, "model.layers.0.mlp.experts.gate_up_proj_blocks"), nullptr);
  EXPECT_EQ(find(g, "model.layers.0.mlp.experts.gate_up_proj_scales"), nullptr);
  EXPECT_EQ(g.size(), 41u - 4u);  // 4 blocks/scales pairs became 4 tensors
}

TEST(Snapshot, BitsandbytesNf4BecomesOneTensorWithItsParameters) {
  auto g = group(kFix + "llama-nf4-dq");
  const auto* t = find(g, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->desc.format, Format::kNf4);
  EXPECT_EQ(t->desc.shape, (std::vector<uint64_t>{256, 256}));
  EXPECT_EQ(t->desc.params["double_quant"], true);
  EXPECT_EQ(t->desc.params["block_size"], 64);
  EXPECT_EQ(t->desc.params["nested_block_size"], 256);
  EXPECT_TRUE(t->desc.params.contains("nested_offset"));
  EXPECT_EQ(find(g, "model.layers.0.self_attn.q_proj.weight.absmax"), nullptr);
  EXPECT_EQ(g.size(), 21u);
}

TEST(Snapshot, Fp8BlockScalesAreRecognised) {
  auto g = group(kFix + "llama-fp8-block");
  const auto* t = find(g, "model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->desc.format, Format::kFp8E4M3);
  EXPECT_EQ(t->desc.params["scale_granularity"], "block");
  EXPECT_EQ(t->desc.params["block_n"], 128);
  EXPECT_EQ(t->desc.params["block_k"], 128);
  EXPECT_EQ(g.size(), 21u);
}

TEST(Snapshot, RankZeroZeroSizeAndWhitespacePaddedHeadersAreValid) {
  TempDir d;
  write_st(d / "model.safetensors",
           "  {\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},\"z\":{\"dtype\":\"BF16\",\"shape\":[0,7],\"data_offsets\":[4,4]}}   ",
           "abcd");
  auto s = Snapshot::open(d.path.string());
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  ASSERT_EQ(s->tensors().size(), 2u);
  EXPECT_EQ(s->find("s")->tensor->numel, 1u);
  EXPECT_EQ(s->find("z")->tensor->size, 0u);
}

TEST(Snapshot, ZeroBasedShardNamesResolveThroughWeightMap) {
  TempDir d;
  write_st(d / "model-00000-of-00001.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x");
  write_st(d / "model-00001-of-00001.safetensors", R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "y");
  write_bytes(d / "model.safetensors.index.json",
              R"({"weight_map":{"a":"model-00000-of-00001.safetensors","b":"model-00001-of-00001.safetensors"}})");
  auto s = Snapshot::open(d.path.string());
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->tensors().size(), 2u);
}

TEST(Snapshot, SingleSafetensorsFileOpensWithItsConfig) {
  auto s = Snapshot::open(kFix + "llama-fp8-block/model.safetensors");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->tensors().size(), 35u);
  EXPECT_EQ(s->config().quantization_config["quant_method"], "fp8");
}

// A cache laid out as huggingface_hub does it: refs, blobs, snapshots of relative symlinks.
struct FakeCache {
  TempDir d;
  std::string commit = "0123456789abcdef0123456789abcdef01234567";
  FakeCache() {
    const std::string repo = d / "models--org--name";
    write_st(repo + "/blobs/aaa", R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "hi");
    write_bytes(repo + "/blobs/bbb", R"({"model_type":"llama"})");
    std::filesystem::create_directories(repo + "/snapshots/" + commit);
    std::filesystem::create_symlink("../../blobs/aaa", repo + "/snapshots/" + commit + "/model.safetensors");
    std::filesystem::create_symlink("../../blobs/bbb", repo + "/snapshots/" + commit + "/config.json");
    write_bytes(repo + "/refs/main", commit + "\n");
    setenv("HF_HUB_CACHE", d.path.c_str(), 1);
  }
  ~FakeCache() { unsetenv("HF_HUB_CACHE"); }
};

TEST(HfCache, RepoIdResolvesToTheSnapshotOfMain) {
  FakeCache c;
  auto s = Snapshot::open("org/name");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->tensors().size(), 1u);
  EXPECT_EQ(s->config().model_type, "llama");
  EXPECT_NE(s->resolved_from().find(c.commit), std::string::npos);
}

TEST(HfCache, RepoIdAtCommitResolves) {
  FakeCache c;
  auto s = Snapshot::open("org/name@" + c.commit);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
}

TEST(HfCache, UnknownRevisionAndUnknownRepoAreErrors) {
  FakeCache c;
  auto s = Snapshot::open("org/name@v9");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("revision 'v9' is not in the cache"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("`hf download org/name --revision v9`"), std::string::npos) << s.status().message();
  EXPECT_EQ(s.status().kind(), ErrorKind::kIo);  // a missing input: exit 5, as a missing path
  auto t = Snapshot::open("org/other");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("not in the Hugging Face cache"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("`hf download org/other`"), std::string::npos) << t.status().message();
  EXPECT_EQ(t.status().kind(), ErrorKind::kIo);
}

TEST(HfCache, CacheDirFollowsTheEnvironment) {
  setenv("HF_HUB_CACHE", "/x/hub-cache", 1);
  EXPECT_EQ(hf_cache_dir(), "/x/hub-cache");
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", "/y/hf", 1);
  EXPECT_EQ(hf_cache_dir(), "/y/hf/hub");
  unsetenv("HF_HOME");
  EXPECT_NE(hf_cache_dir().find(".cache/huggingface/hub"), std::string::npos);
}

}  // namespace
}  // namespace iris
