// Tensor- and expert-parallel rank archives (`iris shard`, `iris convert --tp/--ep`, FORMAT.md
// section 11): for every fixture and format that can be split, the ranks decode bit for bit to
// their boxes of the whole archive (`verify --ranks --against`, whose oracle is the whole
// archive's own decode) and cover every element once or by a stated replication; the boxes are
// the ones the split rules state (computed here from the config, not by the code under test); a
// split through a quantization block, scale tile or double-quantization group, or one the
// model's heads or experts cannot take, is refused naming it, with nothing written; and verify
// finds every inconsistency planted in a folder of ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "converter/shard/shard_rules.h"
#include "tests/cli_runner.h"
#include "tests/rewrite_manifest.h"
#include "tests/sanitizer_scale.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

nlohmann::json rank_record(const std::string& path) {
  const auto j = nlohmann::json::parse(run("inspect " + path + " --json").out);
  return j;
}

TEST(Shard, EveryRankDecodesToItsBoxOfTheWholeArchiveAndTheRanksCoverIt) {
  struct Case {
    std::string fixture, options, spec;
  };
  const Case cases[] = {
      {"llama-bf16", "", "--tp 2"},
      {"llama-bf16", "", "--tp 4"},
      {"llama-bf16", "--quant mxfp4", "--tp 2"},
      {"llama-bf16", "--quant mxfp4", "--tp 4"},
      {"llama-bf16", "--quant fp8-channel", "--tp 4"},
      {"llama-bf16", "--quant fp8", "--tp 2"},
      {"llama-bf16", "--quant nf4 --rule '(o_proj|down_proj)=bf16'", "--tp 2"},
      {"llama-bf16", "--quant nf4 --rule '(o_proj|down_proj)=bf16'", "--tp 4"},
      {"llama-bf16", "--quant fp8-block --rule '(k_proj|v_proj)=bf16'", "--tp 2"},
      {"gptoss-mxfp4", "", "--tp 2"},
      {"gptoss-mxfp4", "", "--tp 2 --ep 2"},
      {"gptoss-mxfp4", "", "--tp 4 --ep 4"},
      {"gptoss-mxfp4", "", "--tp 4 --ep 2"},
      {"gptoss-mxfp4", "--quant fp8-channel", "--tp 2"},
      {"llama-bf16", "--quant nvfp4", "--tp 2"},
      {"llama-bf16", "--quant nvfp4", "--tp 4"},
      {"llama-modelopt-nvfp4", "", "--tp 2"},
      // int_group as the tools stored it: groups of 128 (GPTQ), zero points (AWQ, compressed-
      // tensors asymmetric, groups of 64 at --tp 4: o_proj's 64 columns a rank), channel scales
      // cut on whole bytes, LLM.int8's post factor
      {"llama-gptq-4bit-g128-sym-v1", "", "--tp 2"},
      {"llama-awq-4bit-g128", "", "--tp 2"},
      {"llama-ct-w4-asym-g64", "", "--tp 4"},
      {"llama-ct-w8a16-channel", "", "--tp 4"},
      {"llama-bnb-int8", "", "--tp 2"},
  };
  for (const Case& c : iris::test_scale::inputs(cases)) {  // under the sanitizer, every other case
    SCOPED_TRACE(c.fixture + " " + c.options + " " + c.spec);
    TempDir d;
    ASSERT_EQ(run("convert " + kFix + c.fixture + " -o " + (d / "w.iris") + " -q " + c.options).rc, 0);
    const auto s = run("shard " + (d / "w.iris") + " -o " + (d / "r") + " -q " + c.spec);
    ASSERT_EQ(s.rc, 0) << s.out;
    const auto v = run("verify --ranks " + (d / "r") + " --against " + (d / "w.iris"));
    EXPECT_EQ(v.rc, 0) << v.out;
    EXPECT_NE(v.out.find("OK"), std::string::npos) << v.out;
    // Each rank is a valid archive by itself, of version 2.3 (2.4 where it holds int_group
    // tensors, 2.5 nvfp4 ones, 2.6 LLM.int8's int_group with its post factor).
    const std::string what = c.options + c.fixture;
    const bool int_group = c.options.empty() && (what.find("gptq") != std::string::npos || what.find("awq") != std::string::npos ||
                                                 what.find("-ct-w") != std::string::npos);
    const std::string version = what.find("nvfp4") != std::string::npos ? "2.5"
                                : what.find("bnb-int8") != std::string::npos ? "2.6"
                                : int_group ? "2.4"
                                            : "2.3";
    for (const auto& n : names_in(d / "r")) {
      EXPECT_EQ(run("verify " + (d / "r/" + n) + " -q").rc, 0) << n;
      EXPECT_EQ(rank_record(d / ("r/" + n))["format_version"], version) << n;
    }
    // convert --tp writes the same ranks.
    const auto t = run("convert " + kFix + c.fixture + " -o " + (d / "c") + " -q " + c.options + " " + c.spec);
    ASSERT_EQ(t.rc, 0) << t.out;
    const auto names = names_in(d / "r");
    EXPECT_EQ(names, names_in(d / "c"));  // no temporary left behind
    for (const auto& n : names) EXPECT_TRUE(read_all(d / ("r/" + n)) == read_all(d / ("c/" + n))) << n;
  }
}

// An act-order int_group tensor is cut by rows only: a run of its stored columns is scattered
// over the logical ones, so the row-parallel projections (o_proj, down_proj) are refused by name.
TEST(Shard, ActOrderIntGroupIsCutByRowsOnly) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-gptq-4bit-g64-asym-descact-v1 -o " + (d / "w.iris") + " -q").rc, 0);
  const auto s = run("shard " + (d / "w.iris") + " -o " + (d / "r") + " -q --tp 2");
  EXPECT_NE(s.rc, 0);
  EXPECT_NE(s.out.find("act-order permutation"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("_proj.weight"), std::string::npos) << s.out;
  EXPECT_TRUE(names_in(d / "r").empty());
}

// The boxes the rules give (formats/FORMAT.md section 11), from the fixture's config: llama-bf16
// has 4 heads and 2 key/value heads of 64, intermediate 512, vocabulary 512.
TEST(Shard, TheBoxesAreTheStatedRules) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "w.iris") + " -q").rc, 0);
  ASSERT_EQ(run("shard " + (d / "w.iris") + " -o " + (d / "r") + " -q --tp 4").rc, 0);
  for (uint64_t rank = 0; rank < 4; ++rank) {
    std::map<std::string, nlohmann::json> box;
    const auto listed = nlohmann::json::parse(run("inspect " + (d / ("r/rank-0000" + std::to_string(rank) + "-of-00004.iris")) + " --json").out);
    EXPECT_EQ(listed["rank"]["index"], rank);
    for (const auto& t : listed["tensors"]) box[t["name"].get<std::string>()] = t["shape"];
    const std::string L = "model.layers.0.";
    EXPECT_EQ(box[L + "self_attn.q_proj.weight"], nlohmann::json({64, 256})) << rank;  // one head of 64 rows
    EXPECT_EQ(box[L + "self_attn.k_proj.weight"], nlohmann::json({64, 256})) << rank;  // key/value head rank / 2
    EXPECT_EQ(box[L + "self_attn.o_proj.weight"], nlohmann::json({256, 64})) << rank;  // its head's columns
    EXPECT_EQ(box[L + "mlp.gate_proj.weight"], nlohmann::json({128, 256})) << rank;
    EXPECT_EQ(box[L + "mlp.down_proj.weight"], nlohmann::json({256, 128})) << rank;
    EXPECT_EQ(box["lm_head.weight"], nlohmann::json({128, 256})) << rank;
    EXPECT_EQ(box[L + "input_layernorm.weight"], nlohmann::json({256})) << rank;  // replicated
  }
  // The k_proj boxes start where the rule puts them: ranks 0 and 1 hold head 0, 2 and 3 head 1.
  for (uint64_t rank = 0; rank < 4; ++rank) {
    const std::string path = d / ("r/rank-0000" + std::to_string(rank) + "-of-00004.iris");
    const std::string text = read_all(path);
    uint64_t msize = 0;
    std::memcpy(&msize, text.data() + 24, 8);
    const auto m = nlohmann::json::parse(text.substr(64, msize));
    EXPECT_EQ(m["rank"]["index"], rank);
    EXPECT_EQ(m["rank"]["world"], 4);
    for (const auto& t : m["rank"]["tensors"]) {
      if (t["name"] == "model.layers.1.self_attn.k_proj.weight") {
        EXPECT_EQ(t["start"], nlohmann::json({rank / 2 * 64, 0})) << rank;
      }
      if (t["name"] == "model.layers.1.self_attn.q_proj.weight") {
        EXPECT_EQ(t["start"], nlohmann::json({rank * 64, 0})) << rank;
      }
      if (t["name"] == "model.layers.1.self_attn.o_proj.weight") {
        EXPECT_EQ(t["start"], nlohmann::json({0, rank * 64})) << rank;
      }
    }
  }
  // Expert groups: gpt-oss-mxfp4 has 4 experts; --ep 2 puts experts [0, 2) on group 0.
  ASSERT_EQ(run("convert " + kFix + "gptoss-mxfp4 -o " + (d / "g.iris") + " -q").rc, 0);
  ASSERT_EQ(run("shard " + (d / "g.iris") + " -o " + (d / "e") + " -q --tp 2 --ep 2").rc, 0);
  for (uint64_t rank = 0; rank < 2; ++rank) {
    const std::string text = read_all(d / ("e/rank-0000" + std::to_string(rank) + "-of-00002.iris"));
    uint64_t msize = 0;
    std::memcpy(&msize, text.data() + 24, 8);
    const auto m = nlohmann::json::parse(text.substr(64, msize));
    bool seen = false;
    for (const auto& t : m["rank"]["tensors"])
      if (t["name"] == "model.layers.0.mlp.experts.gate_up_proj") {
        EXPECT_EQ(t["start"][0], rank * 2);
        EXPECT_EQ(t["count"][0], 2);
        EXPECT_EQ(t["count"][1], t["shape"][1]);  // one rank per group: experts whole
        seen = true;
      }
    EXPECT_TRUE(seen) << rank;
  }
}

// A one-layer Llama snapshot (hidden 128, 4 heads of 32, 2 key/value heads, vocabulary 64)
// whose MLP is `inter` wide, with deterministic BF16 weights in [-1, 1).
void write_llama_snapshot(const std::string& dir, uint64_t inter) {
  fs::create_directories(dir);
  const uint64_t h = 128, v = 64;
  write_bytes(dir + "/config.json",
              nlohmann::json{{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", h},
                             {"intermediate_size", inter}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 32},
                             {"num_hidden_layers", 1}, {"vocab_size", v}, {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false},
                             {"torch_dtype", "bfloat16"}}
                  .dump());
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"model.embed_tokens.weight", {v, h}}, {"model.norm.weight", {h}}, {"lm_head.weight", {v, h}},
      {"model.layers.0.input_layernorm.weight", {h}}, {"model.layers.0.post_attention_layernorm.weight", {h}},
      {"model.layers.0.self_attn.q_proj.weight", {h, h}}, {"model.layers.0.self_attn.k_proj.weight", {64, h}},
      {"model.layers.0.self_attn.v_proj.weight", {64, h}}, {"model.layers.0.self_attn.o_proj.weight", {h, h}},
      {"model.layers.0.mlp.gate_proj.weight", {inter, h}}, {"model.layers.0.mlp.up_proj.weight", {inter, h}},
      {"model.layers.0.mlp.down_proj.weight", {h, inter}}};
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  uint32_t x = 12345;
  for (const auto& [name, shape] : tensors) {
    uint64_t n = 1;
    for (uint64_t e : shape) n *= e;
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + 2 * n}}};
    for (uint64_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;  // a linear congruential sequence: the same bytes every run
      const float f = float(x >> 8) / float(1u << 23) - 1.0f;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      data.push_back(char((bits >> 16) & 0xFF));
      data.push_back(char(bits >> 24));
    }
  }
  write_st(dir + "/model.safetensors", header.dump(), data);
}

// Where equal parts of the intermediate dimension would cut a quantization block, the parts fall
// on whole blocks, the first ranks one block more (FORMAT.md section 11): computed here from the
// block sizes, checked against the rank records, and the ranks proven against the whole archive.
TEST(Shard, TheMlpIsCutOnWholeBlocksWhereEqualPartsWouldCrossOne) {
  TempDir d;
  write_llama_snapshot(d / "src", 96);  // three 32-column MXFP4 blocks in down_proj
  struct Case {
    std::string quant;
    uint64_t tp;
    std::vector<uint64_t> widths;  // each rank's share of the 96 intermediate elements
  };
  const Case cases[] = {
      {"mxfp4", 2, {64, 32}},  // 3 blocks of 32 over 2 ranks: 2 + 1
      {"bf16", 4, {24, 24, 24, 24}},  // BF16 has no blocks: equal parts as before
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.quant + " --tp " + std::to_string(c.tp));
    const std::string whole = d / (c.quant + ".iris"), ranks = d / (c.quant + "-r" + std::to_string(c.tp));
    ASSERT_EQ(run("convert " + (d / "src") + " -o " + whole + " -q" + (c.quant == "bf16" ? "" : " --quant " + c.quant)).rc, 0);
    const auto s = run("shard " + whole + " -o " + ranks + " -q --tp " + std::to_string(c.tp));
    ASSERT_EQ(s.rc, 0) << s.out;
    const auto v = run("verify --ranks " + ranks + " --against " + whole);
    EXPECT_EQ(v.rc, 0) << v.out;
    uint64_t start = 0;
    for (uint64_t r = 0; r < c.tp; ++r) {
      const std::string path = ranks + "/rank-0000" + std::to_string(r) + "-of-0000" + std::to_string(c.tp) + ".iris";
      const std::string text = read_all(path);
      uint64_t msize = 0;
      std::memcpy(&msize, text.data() + 24, 8);
      const auto m = nlohmann::json::parse(text.substr(64, msize));
      int seen = 0;
      for (const auto& t : m["rank"]["tensors"]) {
        const std::string name = t["name"];
        if (name.find("gate_proj") != std::string::npos || name.find("up_proj") != std::string::npos) {
          EXPECT_EQ(t["start"], nlohmann::json({start, 0})) << name << " rank " << r;
          EXPECT_EQ(t["count"], nlohmann::json({c.widths[r], 128})) << name << " rank " << r;
          ++seen;
        } else if (name.find("down_proj") != std::string::npos) {
          EXPECT_EQ(t["start"], nlohmann::json({0, start})) << name << " rank " << r;
          EXPECT_EQ(t["count"], nlohmann::json({128, c.widths[r]})) << name << " rank " << r;
          ++seen;
        }
      }
      EXPECT_EQ(seen, 3) << r;
      start += c.widths[r];
    }
    EXPECT_EQ(start, 96u);
  }
  // Fewer whole blocks than ranks: refused, naming the tensor and the unit; nothing written.
  ASSERT_EQ(run("convert " + (d / "src") + " -o " + (d / "fb.iris") + " -q --quant fp8-block").rc, 0);
  const auto r = run("shard " + (d / "fb.iris") + " -o " + (d / "none") + " --tp 2");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("96 cannot be split over 2 ranks in whole 128-element units"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "none") && !fs::is_empty(d / "none"));
}

// The rules themselves at gpt-oss-120b's expert shapes (E = 128 experts, I = 2880, H = 2880) in
// MXFP4 over 4 ranks: the unit from the tensors' cut units (down_proj's 32-column blocks; the
// gate_up rows, two to an intermediate element, have none), then each rank's box of gate_up
// (rows), its bias and down (columns), computed here from the stated rule: 90 blocks over 4
// ranks are 23, 23, 22, 22.
TEST(Shard, GptOssExpertsOverFourRanksFallOnWholeBlocksInPairs) {
  const std::string L = "model.layers.0.mlp.experts.";
  const std::vector<UnitOfTensor> tensors = {
      {L + "gate_up_proj", 3, 1, 32}, {L + "gate_up_proj_bias", 2, 1, 1}, {L + "down_proj", 3, 1, 32}, {L + "down_proj_bias", 2, 1, 1},
      {"model.layers.0.self_attn.o_proj.weight", 2, 1, 1}};
  ShardSpec spec{4, 1};
  auto units = mlp_cut_units(tensors, spec, "w.iris");
  ASSERT_TRUE(units.is_ok());
  EXPECT_EQ(*units, (std::map<std::string, uint64_t>{{"model.layers.0.mlp.experts", 32}}));
  ModelShape m;
  m.model_type = "gpt_oss", m.heads = 64, m.kv_heads = 8, m.head_dim = 64, m.experts = 128, m.mlp_units = *units;
  const uint64_t width[] = {736, 736, 704, 704};
  uint64_t start = 0;
  for (uint32_t r = 0; r < 4; ++r) {
    auto gu = rank_share(L + "gate_up_proj", {128, 5760, 2880}, m, spec, r);
    auto bias = rank_share(L + "gate_up_proj_bias", {128, 5760}, m, spec, r);
    auto down = rank_share(L + "down_proj", {128, 2880, 2880}, m, spec, r);
    auto down_bias = rank_share(L + "down_proj_bias", {128, 2880}, m, spec, r);
    ASSERT_TRUE(gu.is_ok() && bias.is_ok() && down.is_ok() && down_bias.is_ok()) << r;
    EXPECT_EQ(gu->box.start, (std::vector<uint64_t>{0, 2 * start, 0})) << r;
    EXPECT_EQ(gu->box.count, (std::vector<uint64_t>{128, 2 * width[r], 2880})) << r;
    EXPECT_EQ(bias->box.start, (std::vector<uint64_t>{0, 2 * start})) << r;
    EXPECT_EQ(bias->box.count, (std::vector<uint64_t>{128, 2 * width[r]})) << r;
    EXPECT_EQ(down->box.start, (std::vector<uint64_t>{0, 0, start})) << r;
    EXPECT_EQ(down->box.count, (std::vector<uint64_t>{128, 2880, width[r]})) << r;
    EXPECT_TRUE(down_bias->box.covers({128, 2880})) << r;  // replicated, added once after the exchange
    start += width[r];
  }
  EXPECT_EQ(start, 2880u);
  // Experts whole on each rank (--ep 4): no cut, so their blocks set no unit.
  auto whole = mlp_cut_units(tensors, ShardSpec{4, 4}, "w.iris");
  ASSERT_TRUE(whole.is_ok());
  EXPECT_TRUE(whole->empty());
  // A unit past 2^32 (blocks whose least common multiple overflows) is refused by name.
  auto huge = mlp_cut_units({{L + "down_proj", 3, 1, (uint64_t(1) << 31) + 1}, {L + "gate_up_proj", 3, (uint64_t(1) << 31) + 3, 1}},
                            spec, "w.iris");
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("gate_up_proj"), std::string::npos) << huge.status().message();
}

void expect_refused(const std::string& args, const std::string& named, const std::string& folder) {
  const auto r = run(args);
  EXPECT_NE(r.rc, 0) << args;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  if (fs::exists(folder))
    for (const auto& e : fs::directory_iterator(folder)) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(Shard, ASplitTheFormatOrTheModelCannotTakeIsRefusedNamingItAndNothingIsWritten) {
  TempDir d;
  const std::string src = kFix + "llama-bf16";
  ASSERT_EQ(run("convert " + src + " -o " + (d / "fb.iris") + " -q --quant fp8-block").rc, 0);
  expect_refused("shard " + (d / "fb.iris") + " -o " + (d / "r1") + " --tp 2", "'model.layers.0.self_attn.k_proj.weight': rows [0, 64) cut its 128-row scale blocks", d / "r1");
  ASSERT_EQ(run("convert " + src + " -o " + (d / "nf.iris") + " -q --quant nf4").rc, 0);
  expect_refused("shard " + (d / "nf.iris") + " -o " + (d / "r2") + " --tp 2", "double-quantization groups", d / "r2");
  ASSERT_EQ(run("convert " + src + " -o " + (d / "fo.iris") + " -q --quant fp8-block --rule '(q_proj|k_proj|v_proj|gate_proj|up_proj)=bf16'").rc, 0);
  expect_refused("shard " + (d / "fo.iris") + " -o " + (d / "r3") + " --tp 4", "'model.layers.0.self_attn.o_proj.weight': columns [0, 64) cut its 128-column", d / "r3");
  ASSERT_EQ(run("convert " + src + " -o " + (d / "mx.iris") + " -q --quant mxfp4").rc, 0);
  expect_refused("shard " + (d / "mx.iris") + " -o " + (d / "r4") + " --tp 3", "4 attention heads cannot be split over 3 ranks", d / "r4");
  expect_refused("shard " + (d / "mx.iris") + " -o " + (d / "r5") + " --tp 2 --ep 2", "experts cannot be distributed", d / "r5");
  expect_refused("shard " + (d / "mx.iris") + " -o " + (d / "r6") + " --tp 2 --ep 3", "--ep 3 must divide --tp 2", d / "r6");
  // A family without rules.
  fs::copy(src, d / "phi");
  std::string config = read_all(d / "phi/config.json");
  config.replace(config.find("\"llama\""), 7, "\"phi3\"");
  write_bytes(d / "phi/config.json", config);
  ASSERT_EQ(run("convert " + (d / "phi") + " -o " + (d / "phi.iris") + " -q").rc, 0);
  expect_refused("shard " + (d / "phi.iris") + " -o " + (d / "r7") + " --tp 2", "no tensor-parallel split rules for model type 'phi3'", d / "r7");
  // Rank files that exist: refused without --force, kept as they were.
  ASSERT_EQ(run("shard " + (d / "mx.iris") + " -o " + (d / "r8") + " -q --tp 2").rc, 0);
  const std::string kept = read_all(d / "r8/rank-00001-of-00002.iris");
  const auto again = run("shard " + (d / "mx.iris") + " -o " + (d / "r8") + " --tp 2");
  EXPECT_NE(again.rc, 0);
  EXPECT_NE(again.out.find("rank-00000-of-00002.iris"), std::string::npos) << again.out;
  EXPECT_TRUE(read_all(d / "r8/rank-00001-of-00002.iris") == kept);
  EXPECT_EQ(run("shard " + (d / "mx.iris") + " -o " + (d / "r8") + " -q --tp 2 --force").rc, 0);
}

TEST(Shard, VerifyRanksFindsEveryPlantedInconsistency) {
  TempDir d;
  const std::string src = kFix + "llama-bf16";
  ASSERT_EQ(run("convert " + src + " -o " + (d / "mx.iris") + " -q --quant mxfp4").rc, 0);
  ASSERT_EQ(run("convert " + src + " -o " + (d / "bf.iris") + " -q").rc, 0);
  ASSERT_EQ(run("shard " + (d / "mx.iris") + " -o " + (d / "r") + " -q --tp 2").rc, 0);
  ASSERT_EQ(run("shard " + (d / "bf.iris") + " -o " + (d / "o") + " -q --tp 2").rc, 0);
  ASSERT_EQ(run("shard " + (d / "mx.iris") + " -o " + (d / "four") + " -q --tp 4").rc, 0);
  const std::string r0 = d / "r/rank-00000-of-00002.iris", r1 = d / "r/rank-00001-of-00002.iris";
  const std::string k0 = read_all(r0), k1 = read_all(r1);
  auto failed = [&](const std::string& args, const std::string& named) {
    const auto v = run("verify --ranks " + (d / "r") + " " + args);
    EXPECT_NE(v.rc, 0) << args;
    EXPECT_NE(v.out.find(named), std::string::npos) << v.out;
  };
  EXPECT_EQ(run("verify --ranks " + (d / "r") + " --against " + (d / "mx.iris")).rc, 0);
  fs::remove(r1);  // a rank missing
  failed("", "rank 1 of 2 missing");
  write_bytes(r1, read_all(d / "o/rank-00001-of-00002.iris"));  // a rank of another sharding (another source)
  failed("", "of another sharding");
  write_bytes(r1, k0);  // rank 0's archive under rank 1's name
  failed("", "is also");
  write_bytes(r1, read_all(d / "four/rank-00001-of-00004.iris"));  // a rank of another world
  failed("", "of another sharding");
  std::string damaged = k1;
  damaged[damaged.size() - 5] ^= 0x10;  // a flipped byte
  write_bytes(r1, damaged);
  failed("", "checksum mismatch");
  write_bytes(r1, k1);
  failed("--against " + (d / "bf.iris"), "not the archive these ranks were cut from");
  EXPECT_EQ(run("verify --ranks " + (d / "r") + " -q --against " + (d / "mx.iris") + " --json").rc, 0);
  const auto none = run("verify --ranks " + (d / "mx.iris"));
  EXPECT_NE(none.rc, 0) << none.out;
  const auto both = run("verify " + (d / "mx.iris") + " --ranks " + (d / "r"));
  EXPECT_EQ(both.rc, 2) << both.out;
}

// Hostile archives and rank folders (every checksum good): refused in one line, never a crash.
TEST(Shard, HostileArchivesAndRankRecordsAreRefusedNotCrashedOn) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "gptoss-mxfp4 -o " + (d / "g.iris") + " -q").rc, 0);
  // An expert's weight that is not a matrix (0-D and 1-D).
  for (const auto& shape : {nlohmann::json::array(), nlohmann::json({256})}) {
    rewrite_manifest(d / "g.iris", d / "e.iris", [&](nlohmann::json& m) {
      for (auto& t : m["tensors"])
        if (t["name"] == "model.layers.0.input_layernorm.weight") {
          t["name"] = "model.layers.0.mlp.experts.0.w1.weight";
          if (shape.empty()) {  // one element: a scalar of the same bytes' start
            t["shape"] = shape;
            t["components"][0]["shape"] = shape;
            t["components"][0]["bytes"] = 2;
          }
        }
    });
    const auto r = run("shard " + (d / "e.iris") + " --tp 2 -o " + (d / "re"));
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_LT(r.rc, 64) << "killed by a signal: " << r.out;
    EXPECT_NE(r.out.find("model.layers.0.mlp.experts.0.w1.weight"), std::string::npos) << r.out;
  }
  // A config whose head size is 2^62: refused, no division by a wrapped product.
  fs::copy(kFix + "llama-bf16", d / "big");
  std::string config = read_all(d / "big/config.json");
  config.replace(config.find("\"head_dim\": 64"), 14, "\"head_dim\": 4611686018427387904");
  write_bytes(d / "big/config.json", config);
  ASSERT_EQ(run("convert " + (d / "big") + " -o " + (d / "big.iris") + " -q").rc, 0);
  const auto h = run("shard " + (d / "big.iris") + " --tp 4 -o " + (d / "rh"));
  EXPECT_NE(h.rc, 0) << h.out;
  EXPECT_LT(h.rc, 64) << h.out;
  EXPECT_NE(h.out.find("out of range"), std::string::npos) << h.out;
  // Rank records: a box with more dimensions than its tensor, a world that is not tp.
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "w.iris") + " -q").rc, 0);
  ASSERT_EQ(run("shard " + (d / "w.iris") + " --tp 2 -o " + (d / "r") + " -q").rc, 0);
  const std::string r0 = d / "r/rank-00000-of-00002.iris", kept = read_all(r0);
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"its box in the rank record does not describe", [](nlohmann::json& m) {
         auto& e = m["rank"]["tensors"][0];
         for (int i = 0; i < 20; ++i) e["shape"].push_back(9), e["start"].push_back(0);
       }},
      {"the world is tp ranks", [](nlohmann::json& m) { m["rank"]["tp"] = 3; }},
      {"not a rank's archive", [](nlohmann::json& m) { m["rank"]["index"] = "0"; }},
      {"its box lies outside", [](nlohmann::json& m) { m["rank"]["tensors"][0]["shape"][0] = 1; }},
  };
  for (const auto& [named, edit] : edits) {
    write_bytes(r0, kept);
    rewrite_manifest(r0, r0, edit);
    const auto v = run("verify --ranks " + (d / "r"));
    EXPECT_NE(v.rc, 0) << named;
    EXPECT_LT(v.rc, 64) << v.out;
    EXPECT_NE(v.out.find(named), std::string::npos) << v.out;
  }
  write_bytes(r0, kept);
  // --force over a folder of another world: the old world's ranks go.
  ASSERT_EQ(run("shard " + (d / "w.iris") + " --tp 4 -o " + (d / "r") + " -q --force").rc, 0);
  EXPECT_EQ(names_in(d / "r").size(), 4u);
  EXPECT_EQ(run("verify --ranks " + (d / "r") + " -q --against " + (d / "w.iris")).rc, 0);
}

}  // namespace
}  // namespace iris
