// The seed engine's .iris v1 archives: the reader against the real file the seed's
// converter layout produces (tests/data/fixtures/v1, whose blobs are the gptoss-mxfp4
// snapshot's bytes under the seed's names: checked here against the snapshot's safetensors,
// parsed by this test alone), the reader's refusal of every hostile table, and `iris inspect`
// / `iris verify` on v1 from the command line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/iris_v1.h"
#include "tests/cli_runner.h"
#include "tests/test_paths.h"
#include "verify/v1_checks.h"

namespace iris {
namespace {

std::string v1_fixture() { return test_paths::fixtures() + "v1/gptoss-mxfp4.v1.iris"; }

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// One tensor of a sharded safetensors snapshot, read with nothing of iris: the index names
// the shard, the shard's JSON header the byte range.
std::vector<uint8_t> snapshot_tensor(const std::string& dir, const std::string& name, std::string* dtype) {
  const auto index = nlohmann::json::parse(slurp(dir + "/model.safetensors.index.json"));
  const auto file = slurp(dir + "/" + index["weight_map"][name].get<std::string>());
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const auto header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + long(n));
  const auto& t = header[name];
  *dtype = t["dtype"];
  const uint64_t b = t["data_offsets"][0], e = t["data_offsets"][1];
  return {file.begin() + long(8 + n + b), file.begin() + long(8 + n + e)};
}

TEST(V1Archive, TheSeedsFileHoldsTheSnapshotsBytesUnderTheSeedsNames) {
  auto a = V1Archive::open(v1_fixture());
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->entries().size(), 41u);
  EXPECT_TRUE(a->check_conventions().empty());
  const std::string snap = test_paths::fixtures() + "gptoss-mxfp4";
  const std::map<std::string, std::string> same_bytes = {
      {"embed", "model.embed_tokens.weight"},
      {"lm_head", "lm_head.weight"},
      {"L1.w_q", "model.layers.1.self_attn.q_proj.weight"},
      {"L0.b_k", "model.layers.0.self_attn.k_proj.bias"},
      {"L0.router_w", "model.layers.0.mlp.router.weight"},
      {"L0.gate_up_blocks", "model.layers.0.mlp.experts.gate_up_proj_blocks"},
      {"L1.down_scales", "model.layers.1.mlp.experts.down_proj_scales"}};
  for (const auto& [v1_name, hf_name] : same_bytes) {
    const V1Entry* e = a->find(v1_name);
    ASSERT_NE(e, nullptr) << v1_name;
    std::string dtype;
    const auto want = snapshot_tensor(snap, hf_name, &dtype);
    const auto got = a->bytes(*e);
    ASSERT_EQ(got.size(), want.size()) << v1_name;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << v1_name << " vs " << hf_name;
  }
  // The seed widens norms and sinks to FP32: the same values.
  std::string dtype;
  const auto sinks = snapshot_tensor(snap, "model.layers.0.self_attn.sinks", &dtype);
  const V1Entry* e = a->find("L0.sinks");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->dtype, V1DType::kF32);
  ASSERT_EQ(dtype, "BF16");
  for (size_t i = 0; i < e->nbytes / 4; ++i) {
    float got;
    std::memcpy(&got, a->bytes(*e).data() + 4 * i, 4);
    uint32_t bits = uint32_t(sinks[2 * i]) << 16 | uint32_t(sinks[2 * i + 1]) << 24;
    float want;
    std::memcpy(&want, &bits, 4);
    EXPECT_EQ(got, want) << "sinks[" << i << "]";
  }
}

// A v1 file built byte by byte from the layout of FORMATS.md section 5.
struct V1Builder {
  struct Entry {
    std::string name;
    uint64_t offset, nbytes;
    uint32_t dtype, ndim;
    std::array<uint64_t, 8> dims{};
  };
  std::vector<Entry> entries;
  uint32_t version = 1;
  uint64_t size = 0;  // 0: just past the last blob

  void add(const std::string& name, uint32_t dtype, std::vector<uint64_t> shape) {
    static const uint64_t esize[] = {2, 4, 1, 4};
    uint64_t n = esize[dtype];
    for (auto d : shape) n *= d;
    uint64_t pos = 4096;
    for (const auto& e : entries) pos = (e.offset + e.nbytes + 255) / 256 * 256;
    Entry e{name, pos, n, dtype, uint32_t(shape.size())};
    for (size_t i = 0; i < shape.size(); ++i) e.dims[i] = shape[i];
    entries.push_back(e);
  }
  std::vector<uint8_t> bytes() const {
    uint64_t end = 4096;
    for (const auto& e : entries)
      if (e.offset < (uint64_t(1) << 32)) end = std::max(end, e.offset + e.nbytes);  // damaged offsets: no file that large
    std::vector<uint8_t> b(std::max(end, uint64_t(16 + 216 * entries.size())), 0);  // cut to `size` at the end
    std::memcpy(b.data(), "IRISMDL1", 8);
    const uint32_t count = uint32_t(entries.size());
    std::memcpy(&b[8], &version, 4);
    std::memcpy(&b[12], &count, 4);
    for (size_t i = 0; i < entries.size(); ++i) {
      uint8_t* p = &b[16 + 216 * i];
      const Entry& e = entries[i];
      std::memcpy(p, e.name.data(), std::min<size_t>(e.name.size(), 128));
      std::memcpy(p + 128, &e.offset, 8);
      std::memcpy(p + 136, &e.nbytes, 8);
      std::memcpy(p + 144, &e.dtype, 4);
      std::memcpy(p + 148, &e.ndim, 4);
      std::memcpy(p + 152, e.dims.data(), 64);
    }
    for (const auto& e : entries)
      for (uint64_t j = 0; e.offset < b.size() && j < e.nbytes && j < b.size() - e.offset; ++j) b[e.offset + j] = uint8_t(j * 7 + 1);
    if (size) b.resize(size);
    return b;
  }
};

V1Builder two_tensors() {
  V1Builder v;
  v.add("embed", 0, {4, 8});
  v.add("L0.gate_up_blocks", 2, {2, 3, 1, 16});
  return v;
}

Status open_bytes(const std::vector<uint8_t>& b) { return V1Archive::open_memory(b, "test.v1.iris").status(); }

TEST(V1Archive, AWellFormedTableOpensAndFollowsTheConventions) {
  const auto b = two_tensors().bytes();
  auto a = V1Archive::open_memory(b, "test.v1.iris");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_EQ(a->entries().size(), 2u);
  EXPECT_EQ(a->entries()[1].shape, (std::vector<uint64_t>{2, 3, 1, 16}));
  EXPECT_EQ(a->entries()[1].offset, 4096u + 256u);
  EXPECT_TRUE(a->check_conventions().empty());
}

TEST(V1Archive, HostileTablesAreRefusedNamingTheTensor) {
  struct Case {
    const char* what;
    std::function<void(V1Builder&)> damage;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"blob past the end", [](V1Builder& v) { v.size = v.entries[1].offset + 10; }, "runs past the end"},
      {"offset overflow", [](V1Builder& v) { v.entries[0].offset = ~uint64_t(0) - 8; }, "runs past the end"},
      {"blob inside the table", [](V1Builder& v) { v.entries[0].offset = 16; }, "inside the tensor table"},
      {"overlap", [](V1Builder& v) { v.entries[1].offset = v.entries[0].offset + 8; }, "overlap"},
      {"unknown dtype", [](V1Builder& v) { v.entries[0].dtype = 4; }, "unknown dtype code 4"},
      {"nine dims", [](V1Builder& v) { v.entries[0].ndim = 9; }, "at most 8"},
      {"dim past ndim", [](V1Builder& v) { v.entries[0].dims[5] = 3; }, "past ndim"},
      {"size against shape", [](V1Builder& v) { v.entries[0].nbytes += 2; }, "need 64"},
      {"empty name", [](V1Builder& v) { v.entries[0].name = ""; }, "empty name"},
      {"truncated names collide", [](V1Builder& v) {
         v.entries[0].name = std::string(128, 'a');
         v.entries[1].name = std::string(128, 'a') + "_scales";  // the writer truncates it to the same 128 bytes
       }, "truncates names at 128 bytes"},
      {"version 2", [](V1Builder& v) { v.version = 2; }, "version 2"},
      {"table past the end", [](V1Builder& v) { v.size = 16 + 216; }, "tensor table"},
  };
  for (const auto& c : cases) {
    V1Builder v = two_tensors();
    c.damage(v);
    Status s = open_bytes(v.bytes());
    EXPECT_FALSE(s.is_ok()) << c.what;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.what << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << c.what << ": one line";
  }
  // Garbage after a name's NUL: a damaged table.
  auto b = two_tensors().bytes();
  b[16 + 100] = 'x';
  EXPECT_NE(open_bytes(b).message().find("after the name"), std::string::npos);
  // Not v1 at all, and too short.
  std::vector<uint8_t> junk(40, 0);
  EXPECT_FALSE(open_bytes(junk).is_ok());
  EXPECT_FALSE(open_bytes({'I', 'R', 'I', 'S'}).is_ok());
}

TEST(V1Archive, DeparturesFromTheWritersLayoutAreReported) {
  V1Builder v = two_tensors();
  v.entries[1].offset += 16;  // not 256-aligned
  auto b = v.bytes();
  auto a = V1Archive::open_memory(b, "t");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  auto d = a->check_conventions();
  ASSERT_FALSE(d.empty());
  EXPECT_NE(d[0].find("L0.gate_up_blocks"), std::string::npos) << d[0];
  V1Builder t = two_tensors();
  t.size = t.entries[1].offset + t.entries[1].nbytes + 5;
  b = t.bytes();
  a = V1Archive::open_memory(b, "t");
  ASSERT_TRUE(a.is_ok());
  d = a->check_conventions();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].find("5 bytes after the last tensor"), std::string::npos) << d[0];
  VerifyReport r = verify_v1_structure(*a);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.notes.size(), 1u);
}

TEST(V1Cli, InspectAndVerifyReadV1AndSayThereAreNoChecksums) {
  using testing_cli::run;
  auto r = run("verify " + v1_fixture());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("no checksums"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("41 tensors"), std::string::npos) << r.out;
  r = run("inspect --json " + v1_fixture());
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format_version"], "1");
  EXPECT_EQ(j["checksums"], false);
  EXPECT_EQ(j["tensor_count"], 41);
  r = run("verify --device cuda " + v1_fixture());
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("v1"), std::string::npos) << r.out;
  // A damaged v1 file: a one-line error naming the file and the tensor, not a crash.
  auto bytes = slurp(v1_fixture());
  bytes[16 + 144] = 9;  // the first entry's dtype
  const std::string bad = ::testing::TempDir() + "/bad.v1.iris";
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  r = run("verify " + bad);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("'embed': unknown dtype code 9"), std::string::npos) << r.out;
  r = run("inspect " + bad);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("bad.v1.iris"), std::string::npos) << r.out;
}

// The seed engine's format written: converting the gpt-oss snapshot and exporting it as v1
// gives the seed converter's own file (the fixture) byte for byte; what v1 cannot express is
// refused naming the tensor, with no file left behind.
TEST(V1Cli, ExportOfTheConvertedSnapshotIsTheSeedsFileByteForByte) {
  using testing_cli::run;
  const std::string dir = ::testing::TempDir() + "/v1_export";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto r = run("convert -q " + test_paths::fixtures() + "gptoss-mxfp4 -o " + dir + "/g.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run("export -q " + dir + "/g.iris --format iris-v1 -o " + dir + "/g.v1.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto got = slurp(dir + "/g.v1.iris"), want = slurp(v1_fixture());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "first difference at byte "
                           << (std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
  r = run("verify " + dir + "/g.v1.iris");
  EXPECT_EQ(r.rc, 0) << r.out;

  r = run("convert -q " + test_paths::fixtures() + "gptoss-mxfp4 --quant nf4 -o " + dir + "/n.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run("export -q " + dir + "/n.iris --format iris-v1 -o " + dir + "/n.v1.iris");
  EXPECT_EQ(r.rc, 7) << r.out;
  EXPECT_NE(r.out.find("tensor 'model.layers.0.mlp.experts."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("v1 cannot express"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/n.v1.iris"));
  r = run("convert -q " + test_paths::fixtures() + "llama-bf16 -o " + dir + "/l.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run("export -q " + dir + "/l.iris --format iris-v1 -o " + dir + "/l.v1.iris");
  EXPECT_EQ(r.rc, 7) << r.out;
  EXPECT_NE(r.out.find("no place among the seed engine's gpt-oss names"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/l.v1.iris"));
  r = run("export -q " + dir + "/g.iris --format iris-v1 --dtype bf16 -o " + dir + "/x.v1.iris");
  EXPECT_EQ(r.rc, 2) << r.out;
}

// A v1 archive as a conversion source: with the snapshot's config, it converts to the very
// tensors converting the snapshot gives (iris diff: every tensor bit-identical, none missing),
// and back out as v1 byte for byte; without a config, or with --config on a snapshot, a
// one-line error.
TEST(V1Cli, ConvertingTheSeedsFileGivesTheSnapshotsTensors) {
  using testing_cli::run;
  const std::string dir = ::testing::TempDir() + "/v1_source";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string snap = test_paths::fixtures() + "gptoss-mxfp4";
  auto r = run("convert -q " + snap + " -o " + dir + "/snap.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run("convert -q " + v1_fixture() + " --config " + snap + " -o " + dir + "/v1.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run("diff --json " + dir + "/v1.iris " + dir + "/snap.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tensors"].size(), 37u);
  for (const auto& t : j["tensors"]) {
    EXPECT_TRUE(t["in_a"].get<bool>() && t["in_b"].get<bool>()) << t["name"];
    EXPECT_TRUE(t.value("bit_identical", false)) << t["name"] << " " << t.dump();
    EXPECT_EQ(t["format_a"], t["format_b"]) << t["name"];
  }
  r = run("export -q " + dir + "/v1.iris --format iris-v1 -o " + dir + "/again.v1.iris");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(slurp(dir + "/again.v1.iris") == slurp(v1_fixture()));
  // The config from a bare config.json works too, and a quantizing conversion runs.
  r = run("convert -q " + v1_fixture() + " --config " + snap + "/config.json --quant nf4 -o " + dir + "/nf4.iris");
  EXPECT_EQ(r.rc, 0) << r.out;

  r = run("convert -q " + v1_fixture() + " -o " + dir + "/none.iris");
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("holds no config.json; give --config"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/none.iris"));
  r = run("convert -q " + snap + " --config " + snap + " -o " + dir + "/x.iris");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = run("convert -q " + v1_fixture() + " --config " + test_paths::fixtures() + "llama-bf16 -o " + dir + "/llama.iris");
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("gpt_oss"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace iris
