// `iris verify --against SRC`: passes on every fixture conversion (kept, and requantized to
// each target format) and fails on each kind of wrong archive -- a swapped pair of tensors, a
// tensor whose scales are one exponent off, a missing tensor, a corrupted tile -- each built
// here by rewriting a correct archive with the library's writer (valid checksums, wrong
// weights), so only the comparison with the source can catch it.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "formats/iris_archive.h"
#include "formats/iris_writer.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
const std::string kFix = test_paths::fixtures();

// Copies `in` to `out`, letting `edit` change each tensor's name and component bytes.
using Edit = std::function<bool(std::string& name, Role role, std::vector<uint8_t>& bytes)>;  // false: drop the tensor
void rewrite(const std::string& in, const std::string& out, const Edit& edit) {
  auto a = IrisArchive::open(in);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  IrisWriter w;
  w.set_model_type(a->manifest().model_type);
  for (const auto& t : a->manifest().tensors) {
    TensorDesc d = t.desc;
    std::vector<ComponentProducer> producers;
    bool keep = true;
    for (const auto& c : t.components) {
      auto span = a->bytes(c);
      std::vector<uint8_t> bytes(span.begin(), span.end());
      keep = edit(d.name, c.spec.role, bytes) && keep;
      producers.push_back([bytes](ByteSink& s) { return s.write(bytes); });
    }
    if (keep) w.add_tensor(d, t.source.json(), std::move(producers));
  }
  WriteOptions wo;
  ASSERT_TRUE(w.write(out, wo).is_ok());
}

testing_cli::Run verify_against(const std::string& archive, const std::string& src) {
  return run("verify " + archive + " --against " + src + " --json");
}

TEST(VerifyAgainst, PassesOnEveryFixtureConversion) {
  TempDir d;
  struct Case { std::string fixture, quant; };
  for (const Case& c : {Case{"llama-bf16", "keep"}, Case{"llama-bf16", "mxfp4"}, Case{"llama-bf16", "nf4"}, Case{"llama-bf16", "fp8-block"},
                        Case{"llama-bf16", "fp8-channel"}, Case{"gptoss-mxfp4", "keep"}, Case{"gptoss-mxfp4", "nf4"}, Case{"llama-nf4-dq", "keep"},
                        Case{"llama-fp8-block", "keep"}, Case{"llama-fp8-block", "mxfp4"}}) {
    const std::string out = d / (c.fixture + "-" + c.quant + ".iris");
    ASSERT_EQ(run("convert " + kFix + c.fixture + " -o " + out + " --quant " + c.quant + " -q").rc, 0);
    auto r = verify_against(out, kFix + c.fixture);
    EXPECT_EQ(r.rc, 0) << c.fixture << " " << c.quant << ": " << r.out.substr(0, 2000);
    auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    size_t against = 0;
    for (const auto& t : j["tensors"])
      for (const auto& ch : t["checks"]) against += ch["check"].get<std::string>().rfind("against", 0) == 0;
    EXPECT_EQ(against, j["tensors"].size()) << "one comparison per tensor";
  }
}

TEST(VerifyAgainst, FailsOnEachKindOfWrongArchive) {
  TempDir d;
  const std::string src = kFix + "llama-bf16";
  ASSERT_EQ(run("convert " + src + " -o " + (d / "good.iris") + " --quant mxfp4 -q").rc, 0);
  auto fails_on = [&](const std::string& what, const std::string& path, const std::string& tensor, const std::string& check) {
    auto r = verify_against(path, src);
    EXPECT_EQ(r.rc, 4) << what << ": " << r.out.substr(0, 1000);
    auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    bool found = false;
    for (const auto& t : j["tensors"])
      for (const auto& c : t["checks"])
        if (t["name"] == tensor && c["check"] == check && c["ok"] == false) found = true;
    EXPECT_TRUE(found) << what << ": no failing " << check << " on " << tensor;
  };
  // A swapped pair: two same-shape projections exchange their weights.
  const std::string a = "model.layers.0.mlp.gate_proj.weight", b = "model.layers.0.mlp.up_proj.weight";
  ASSERT_NO_FATAL_FAILURE(rewrite(d / "good.iris", d / "swapped.iris", [&](std::string& name, Role role, std::vector<uint8_t>&) {
    if (role != Role::kCodes) return true;  // once per tensor
    if (name == a) name = b;
    else if (name == b) name = a;
    return true;
  }));
  fails_on("swapped tensors", d / "swapped.iris", a, "against:error");
  // Scales one exponent off (every E8M0 scale of one tensor + 1: all values doubled).
  const std::string q = "model.layers.1.self_attn.o_proj.weight";
  ASSERT_NO_FATAL_FAILURE(rewrite(d / "good.iris", d / "scale.iris", [&](std::string& name, Role role, std::vector<uint8_t>& bytes) {
    if (name == q && role == Role::kScales)
      for (auto& x : bytes) x = uint8_t(x + 1);
    return true;
  }));
  fails_on("scale one exponent off", d / "scale.iris", q, "against:error");
  // A missing tensor.
  ASSERT_NO_FATAL_FAILURE(rewrite(d / "good.iris", d / "missing.iris", [&](std::string& name, Role, std::vector<uint8_t>&) { return name != q; }));
  fails_on("missing tensor", d / "missing.iris", q, "against:present");
  // A corrupted tile (a byte flipped after writing: its checksum no longer matches).
  {
    auto g = IrisArchive::open(d / "good.iris");
    ASSERT_TRUE(g.is_ok());
    const auto* t = g->find(q);
    ASSERT_NE(t, nullptr);
    std::string bytes = read_all(d / "good.iris");
    bytes[g->absolute_offset(t->components[0]) + 7] ^= 0x40;
    write_bytes(d / "corrupt.iris", bytes);
  }
  fails_on("corrupted tile", d / "corrupt.iris", q, "against:decode");
  // Limits can be tightened per tensor: the good archive then fails on that tensor alone.
  auto r = run("verify " + (d / "good.iris") + " --against " + src + " --max-rel-l2 'o_proj=0.001'");
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("FAIL " + q), std::string::npos) << r.out;
}

// Without a reference or a GPU, verify still checks the values: a NaN scale (E8M0 0xFF), and
// padding that is not the zero code, in an archive whose checksums are all valid.
TEST(VerifyValues, NaNScaleAndDirtyPaddingFailWithoutAReference) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "gptoss-mxfp4 -o " + (d / "good.iris") + " -q").rc, 0);
  auto ok = run("verify " + (d / "good.iris") + " --json");
  ASSERT_EQ(ok.rc, 0) << ok.out;
  EXPECT_NE(ok.out.find("values:padding"), std::string::npos);
  const std::string t = "model.layers.0.mlp.experts.down_proj";
  ASSERT_NO_FATAL_FAILURE(rewrite(d / "good.iris", d / "nan.iris", [&](std::string& name, Role role, std::vector<uint8_t>& bytes) {
    if (name == t && role == Role::kScales) bytes[3] = 0xFF;
    return true;
  }));
  auto r = run("verify " + (d / "nan.iris"));
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("values:scales: 1 E8M0 scales are 0xFF"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("values:finite"), std::string::npos) << r.out;
  // llama-bf16 to nf4 with 48-column tiles (K = 256 is not a multiple): every row has padding.
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "pad.iris") + " --quant nf4 --tile-k 192 -q").rc, 0);
  ASSERT_EQ(run("verify " + (d / "pad.iris")).rc, 0);
  const std::string p = "model.layers.0.mlp.gate_proj.weight";
  ASSERT_NO_FATAL_FAILURE(rewrite(d / "pad.iris", d / "dirty.iris", [&](std::string& name, Role role, std::vector<uint8_t>& bytes) {
    if (name == p && role == Role::kCodes) bytes[bytes.size() - 1] = 0x12;  // the last byte of the last tile: padding
    return true;
  }));
  auto dirty = run("verify " + (d / "dirty.iris"));
  EXPECT_EQ(dirty.rc, 4) << dirty.out;
  EXPECT_NE(dirty.out.find("values:padding: 1 padding bytes are not the zero code 0x77"), std::string::npos) << dirty.out;
}

TEST(Diff, ReportsStatisticsPerTensor) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "q.iris") + " --quant nf4 -q").rc, 0);
  auto r = run("diff " + (d / "q.iris") + " " + kFix + "llama-bf16 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  size_t requantized = 0, identical = 0;
  for (const auto& t : j["tensors"]) {
    ASSERT_TRUE(t["compared"].get<bool>()) << t.dump();
    if (t["bit_identical"].get<bool>()) ++identical;
    else if (t["format_a"] == "nf4") ++requantized;
  }
  EXPECT_GT(requantized, 0u);
  EXPECT_GT(identical, 0u);  // norms and embeddings are kept
}

}  // namespace
}  // namespace iris
