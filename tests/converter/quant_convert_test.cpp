// convert --quant end to end: the oracle checks (bitsandbytes bytes, transformers values),
// every source x target pair, the per-tensor policy, dry runs, non-finite inputs, and shapes
// that do not fit the blocks or tiles.
#include <gtest/gtest.h>

#include "converter/pipeline/quant_policy.h"
#include "converter/pipeline/requantize.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/float_bits.h"
#include "converter/sources/safetensors_file.h"
#include "converter/sources/safetensors_writer.h"
#include "tests/test_paths.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

bool same_bytes(const SafetensorsFile& a, const SafetensorsTensor& ta, const SafetensorsFile& b, const SafetensorsTensor& tb) {
  auto x = a.data(ta), y = b.data(tb);
  return ta.dtype == tb.dtype && ta.shape == tb.shape && x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

TEST(QuantConvert, Nf4FromBf16ExportsTheExactCheckpointBitsandbytesWrote) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "n.iris") + " --quant nf4 -q").rc, 0);
  ASSERT_EQ(run("export " + (d / "n.iris") + " -o " + (d / "n.safetensors") + " -q").rc, 0);
  auto ours = SafetensorsFile::open(d / "n.safetensors");
  auto bnb = SafetensorsFile::open(kFix + "llama-nf4-dq/model.safetensors");
  ASSERT_TRUE(ours.is_ok() && bnb.is_ok());
  ASSERT_EQ(ours->tensors().size(), bnb->tensors().size());
  for (const auto& t : bnb->tensors()) {
    const auto* o = ours->find(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_TRUE(same_bytes(*ours, *o, *bnb, t)) << t.name;
  }
}

TEST(QuantConvert, Mxfp4ArchiveExportsTransformersDequantizedValues) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "gptoss-mxfp4 -o " + (d / "g.iris") + " -q").rc, 0);
  ASSERT_EQ(run("export " + (d / "g.iris") + " -o " + (d / "g.safetensors") + " --dtype bf16 -q").rc, 0);
  auto ours = SafetensorsFile::open(d / "g.safetensors");
  auto ref = SafetensorsFile::open(kFix + "refs/gptoss-mxfp4.dequant.transformers.safetensors");
  ASSERT_TRUE(ours.is_ok() && ref.is_ok());
  for (const char* name : {"model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj"}) {
    const auto* o = ours->find(name);
    const auto* r = ref->find(name);
    ASSERT_TRUE(o && r);
    const uint64_t e = o->shape[0], n = o->shape[1], k = o->shape[2];  // ours [E, N, K]; transformers [E, K, N]
    const auto* a = reinterpret_cast<const uint16_t*>(ours->data(*o).data());
    const auto* b = reinterpret_cast<const uint16_t*>(ref->data(*r).data());
    for (uint64_t x = 0; x < e; ++x)
      for (uint64_t i = 0; i < n; ++i)
        for (uint64_t j = 0; j < k; ++j) ASSERT_EQ(a[(x * n + i) * k + j], b[(x * k + j) * n + i]) << name;
  }
}

class EveryPair : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EveryPair, ConvertsVerifiesAndDequantizes) {
  auto [src, target] = GetParam();
  TempDir d;
  auto c = run("convert " + kFix + src + " -o " + (d / "o.iris") + " --quant " + target + " -q --json");
  ASSERT_EQ(c.rc, 0) << c.out;
  auto j = nlohmann::json::parse(c.out);
  int requantized = 0;
  for (const auto& t : j["per_tensor"]) {
    if (t["requantized"] == true) {
      ++requantized;
      ASSERT_TRUE(t.contains("quality")) << t.dump();
      const double rel = t["quality"]["rel_l2"].is_number() ? t["quality"]["rel_l2"].get<double>() : 1e9;
      // Worst case: a 4-bit format re-encoding another 4-bit format's values.
      EXPECT_LT(rel, target == "bf16" ? 0.01 : 0.35) << t["name"] << " " << t["from"] << " -> " << t["to"];
    }
    if (t["name"].get<std::string>().find("norm") != std::string::npos) {
      EXPECT_EQ(t["from"], t["to"]) << t["name"];
    }
  }
  // A tensor already in the target format is carried over byte for byte, never re-encoded.
  const bool same = (src == "llama-nf4-dq" && target == "nf4") || (src == "llama-fp8-block" && target == "fp8-block");
  if (same || target == "keep") {
    EXPECT_EQ(requantized, 0);
  } else if (target != "bf16" && src != "gptoss-mxfp4") {
    EXPECT_GT(requantized, 0);
  }
  EXPECT_EQ(run("verify " + (d / "o.iris")).rc, 0);
  auto e = run("export " + (d / "o.iris") + " -o " + (d / "o.safetensors") + " --dtype f32 -q");
  ASSERT_EQ(e.rc, 0) << e.out;
  auto f = SafetensorsFile::open(d / "o.safetensors");
  ASSERT_TRUE(f.is_ok());
  for (const auto& t : f->tensors()) EXPECT_TRUE(t.dtype == DType::kF32 || t.dtype == DType::kI64 || t.dtype == DType::kU8) << t.name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EveryPair,
                         ::testing::Combine(::testing::Values("llama-bf16", "gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"),
                                            ::testing::Values("mxfp4", "nf4", "fp8", "fp8-channel", "fp8-block", "bf16", "keep")),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& i) {
                           std::string n = std::get<0>(i.param) + "_to_" + std::get<1>(i.param);
                           for (auto& ch : n) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

nlohmann::json plan(const std::string& args) {
  auto r = run("convert " + args + " --dry-run --json -o /nonexistent/never-written.iris");
  EXPECT_EQ(r.rc, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

std::string to_of(const nlohmann::json& j, const std::string& name) {
  for (const auto& t : j["per_tensor"])
    if (t["name"] == name) return t["to"];
  return "?";
}

// A checkpoint's skip list is matched as literal module paths with '*' inside one segment,
// never compiled to a regex: a pattern built to backtrack exponentially in a regex engine
// answers at once, and matching follows the module boundaries.
TEST(QuantPolicy, SourceSkipListMatchesModulePathsNotRegexes) {
  EXPECT_TRUE(module_pattern_matches("lm_head", "lm_head.weight"));
  EXPECT_TRUE(module_pattern_matches("model.layers.*.self_attn", "model.layers.3.self_attn.q_proj.weight"));
  EXPECT_TRUE(module_pattern_matches("experts.down_proj", "model.layers.0.mlp.experts.down_proj_bias"));
  EXPECT_FALSE(module_pattern_matches("layers.1", "model.layers.10.mlp.weight"));
  EXPECT_FALSE(module_pattern_matches("self_attn", "model.layers.0.self_attention_x.weight"));
  EXPECT_FALSE(module_pattern_matches("a.(b)", "a.b.weight"));  // regex syntax is literal text
  std::string evil;
  for (int i = 0; i < 30; ++i) evil += "a*";
  const std::string name = std::string(3000, 'a') + ".weight";
  EXPECT_FALSE(module_pattern_matches(evil + "b", name));
  EXPECT_TRUE(module_pattern_matches(evil, name));
}

TEST(QuantPolicyCli, DefaultsRulesSkipsAndTheSourceSkipList) {
  auto j = plan(kFix + "llama-bf16 --quant mxfp4");
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.up_proj.weight"), "mxfp4");
  EXPECT_EQ(to_of(j, "model.embed_tokens.weight"), "bf16");
  EXPECT_EQ(to_of(j, "lm_head.weight"), "bf16");
  EXPECT_EQ(to_of(j, "model.norm.weight"), "bf16");
  j = plan(kFix + "llama-bf16 --quant mxfp4 --rule 'down_proj=fp8-block' --rule 'proj=nf4' --skip 'layers\\.1\\.self_attn'");
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.down_proj.weight"), "fp8_e4m3");   // first rule wins
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.up_proj.weight"), "nf4");          // second rule
  EXPECT_EQ(to_of(j, "model.layers.1.self_attn.q_proj.weight"), "bf16");    // --skip beats rules
  j = plan(kFix + "llama-bf16 --rule 'lm_head=fp8-channel'");                // a rule overrides the defaults
  EXPECT_EQ(to_of(j, "lm_head.weight"), "fp8_e4m3");
  j = plan(kFix + "gptoss-mxfp4 --quant fp8");                               // modules_to_not_convert: self_attn, router
  EXPECT_EQ(to_of(j, "model.layers.0.self_attn.q_proj.weight"), "bf16");
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.router.weight"), "bf16");
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.experts.down_proj"), "fp8_e4m3");   // flagged: requantized from mxfp4
  EXPECT_EQ(to_of(j, "model.layers.0.mlp.experts.down_proj_bias"), "bf16");   // stacked expert biases stay
  EXPECT_EQ(to_of(j, "model.layers.1.mlp.experts.gate_up_proj_bias"), "bf16");
  for (const auto& t : j["per_tensor"])
    if (t["name"] == "model.layers.0.mlp.experts.down_proj") {
      EXPECT_EQ(t["requantized_from_quantized"], true);
    }
}

TEST(QuantPolicyCli, UnmatchedRuleIsAUsageErrorUnlessAllowed) {
  TempDir d;
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "o.iris") + " --rule 'nothing_matches=nf4'");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("matches no tensor"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "o.iris"));
  EXPECT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "o.iris") + " --rule 'nothing_matches=nf4' --allow-unmatched -q").rc, 0);
  EXPECT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "p.iris") + " --rule 'x=q2_k'").rc, 2);
}

// A --skip that matches nothing is as likely a typo as a --rule that matches nothing.
TEST(QuantPolicyCli, UnmatchedSkipIsAUsageErrorUnlessAllowed) {
  TempDir d;
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "o.iris") + " --quant nf4 --skip 'down_prj'");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--skip 'down_prj' matches no tensor"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "o.iris"));
  // Two skips matching the same tensor both count as matched.
  EXPECT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "o.iris") + " --quant nf4 --skip 'down_proj' --skip 'layers\\.0\\.mlp' -q").rc, 0);
  EXPECT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "p.iris") + " --quant nf4 --skip 'down_prj' --allow-unmatched -q").rc, 0);
}

TEST(QuantPolicyCli, DryRunPrintsThePlanAndWritesNothing) {
  TempDir d;
  auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "o.iris") + " --quant nf4 --dry-run");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("model.layers.0.mlp.up_proj.weight"), std::string::npos);
  EXPECT_NE(r.out.find("total: 21 tensors, 14 quantized"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "o.iris"));
  EXPECT_EQ(fs::directory_iterator(d.path) == fs::directory_iterator(), true);
}

// The dry run's archive size is the size of the file the real run writes, byte for byte, for
// every fixture and target (embedded files, manifest and alignment included).
TEST(QuantPolicyCli, DryRunSizeIsTheRealFileSize) {
  TempDir d;
  for (const std::string fixture : {"llama-bf16", "gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"})
    for (const std::string quant : {"keep", "nf4", "mxfp4", "fp8-block"}) {
      const std::string args = "convert " + kFix + fixture + " -o " + (d / "o.iris") + " --quant " + quant;
      auto r = run(args + " --dry-run --json");
      ASSERT_EQ(r.rc, 0) << args << ": " << r.out;
      const auto j = nlohmann::json::parse(r.out);
      r = run(args + " -q --force");
      ASSERT_EQ(r.rc, 0) << args << ": " << r.out;
      EXPECT_EQ(j["file_bytes"].get<uint64_t>(), fs::file_size(d / "o.iris")) << args;
    }
}

// A snapshot of BF16 weights built in the test, some holding NaN or Inf.
void write_weights(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors, bool nan_in_first) {
  std::vector<SafetensorsEntry> e;
  for (size_t t = 0; t < tensors.size(); ++t) {
    uint64_t n = 1;
    for (auto x : tensors[t].second) n *= x;
    const bool nan = nan_in_first && t == 0;
    e.push_back({tensors[t].first, DType::kBF16, tensors[t].second, [n, t, nan](ByteSink& s) -> Status {
                   std::vector<uint16_t> v(n);
                   for (uint64_t i = 0; i < n; ++i) v[i] = f32_to_bf16(std::sin(float(i * 7 + t)) * 0.05f);
                   if (nan && n > 5) v[5] = 0x7fc0;
                   return s.write({reinterpret_cast<const uint8_t*>(v.data()), n * 2});
                 }});
  }
  fs::create_directories(fs::path(path).parent_path());
  SafetensorsWriteOptions o;
  ASSERT_TRUE(write_safetensors(path, std::move(e), o).is_ok());
}

// --max-rss: the plan's predicted peak picks smaller chunks to fit (the archive is the same
// bytes), or the run is refused before it starts and writes nothing; dry runs state the peak.
TEST(QuantConvert, MaxRssPicksSmallerChunksOrRefusesUpFront) {
  TempDir d;
  write_weights(d / "s/model.safetensors", {{"big.weight", {8192, 1024}}}, false);  // 8M values: above the default chunk
  auto plan_default = nlohmann::json::parse(run("convert " + (d / "s") + " -o " + (d / "x.iris") + " --quant nf4 --dry-run --json").out);
  const uint64_t peak = plan_default["predicted_peak_rss_bytes"].get<uint64_t>();
  EXPECT_GT(peak, 64ull << 20);
  const uint64_t default_chunk = plan_default["chunk_floats"].get<uint64_t>();
  EXPECT_EQ(default_chunk, RequantOptions{}.chunk_floats);
  // A budget below the default plan's peak but above the smallest chunk's.
  const std::string budget = std::to_string((peak >> 20) - 6) + "MiB";
  auto fitted = nlohmann::json::parse(
      run("convert " + (d / "s") + " -o " + (d / "x.iris") + " --quant nf4 --dry-run --json --max-rss " + budget).out);
  EXPECT_LT(fitted["chunk_floats"].get<uint64_t>(), default_chunk);
  EXPECT_LE(fitted["predicted_peak_rss_bytes"].get<uint64_t>(), ((peak >> 20) - 6) << 20);
  ASSERT_EQ(run("convert " + (d / "s") + " -o " + (d / "a.iris") + " --quant nf4 -q").rc, 0);
  ASSERT_EQ(run("convert " + (d / "s") + " -o " + (d / "b.iris") + " --quant nf4 -q --max-rss " + budget).rc, 0);
  EXPECT_TRUE(read_all(d / "a.iris") == read_all(d / "b.iris"));
  // Below what even the smallest chunks need: refused, one line naming the option, nothing written.
  auto r = run("convert " + (d / "s") + " -o " + (d / "c.iris") + " --quant nf4 --max-rss 40MiB");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--max-rss"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "c.iris"));
  EXPECT_EQ(run("convert " + (d / "s") + " -o " + (d / "c.iris") + " --quant nf4 --max-rss 12QB").rc, 2);
}

TEST(QuantConvert, NonFiniteInputsAreRefusedUnlessAllowed) {
  TempDir d;
  write_weights(d / "s/model.safetensors", {{"a.weight", {4, 64}}}, true);
  // nf4 finds it in its offset pass, on the BF16 bit patterns; mxfp4 while encoding.
  for (std::string q : {"mxfp4", "nf4"}) {
    SCOPED_TRACE(q);
    const std::string out = d / (q + ".iris");
    auto r = run("convert " + (d / "s") + " -o " + out + " --quant " + q);
    EXPECT_EQ(r.rc, 3) << r.out;
    EXPECT_NE(r.out.find("tensor 'a.weight': 1 non-finite value(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("index 5"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(fs::directory_iterator(d.path / "s") != fs::directory_iterator(), true);
    EXPECT_EQ(run("convert " + (d / "s") + " -o " + out + " --quant " + q + " --allow-nonfinite -q").rc, 0);
  }
}

TEST(QuantConvert, AwkwardShapesPadAndDecodeBackToTheLogicalShape) {
  TempDir d;
  write_weights(d / "s/model.safetensors",
                {{"k33.weight", {5, 33}}, {"k50.weight", {3, 50}}, {"one.weight", {1, 64}}, {"edge.weight", {130, 200}},
                 {"stack.weight", {2, 17, 96}}},
                false);
  for (std::string q : {"mxfp4", "nf4", "fp8", "fp8-channel", "fp8-block"}) {
    auto c = run("convert " + (d / "s") + " -o " + (d / (q + ".iris")) + " --quant " + q + " -q --json");
    ASSERT_EQ(c.rc, 0) << q << ": " << c.out;
    auto j = nlohmann::json::parse(c.out);
    for (const auto& t : j["per_tensor"]) {
      EXPECT_EQ(t["requantized"], true) << q << " " << t["name"];
      EXPECT_LT(t["quality"]["rel_l2"].get<double>(), q.rfind("fp8", 0) == 0 ? 0.08 : 0.2) << q << " " << t["name"];
    }
    ASSERT_EQ(run("verify " + (d / (q + ".iris"))).rc, 0);
    ASSERT_EQ(run("export " + (d / (q + ".iris")) + " -o " + (d / (q + ".safetensors")) + " --dtype f32 -q").rc, 0);
    auto f = SafetensorsFile::open(d / (q + ".safetensors"));
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(f->find("k33.weight")->shape, (std::vector<uint64_t>{5, 33})) << q;
    EXPECT_EQ(f->find("k50.weight")->shape, (std::vector<uint64_t>{3, 50})) << q;
    EXPECT_EQ(f->find("edge.weight")->shape, (std::vector<uint64_t>{130, 200})) << q;
    EXPECT_EQ(f->find("stack.weight")->shape, (std::vector<uint64_t>{2, 17, 96})) << q;
  }
  auto i = run("inspect " + (d / "nf4.iris") + " --json");
  const auto inspected = nlohmann::json::parse(i.out);  // named: the loop must not outlive it
  for (const auto& t : inspected["tensors"])
    if (t["name"] == "k50.weight") {
      EXPECT_EQ(t["layout"]["kind"], "flat");  // NF4 blocks cross rows when K % 64 != 0
    }
}

}  // namespace
}  // namespace iris
