// `iris export ARCHIVE -o DIR/`: a Hugging Face snapshot folder. Checked here without
// transformers (the GPU machine's run loads the folders with from_pretrained): the shards and
// their index agree with each other, the config's quantization_config says what the tensors
// are, the other embedded files come along, and converting the folder back gives the archive's
// tensors bit for bit. What no transformers method describes is refused, leaving nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/iris_writer.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_cli::run;

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// Every tensor of `a` equals the same-named tensor of `b`, and both hold the same names.
void expect_same_tensors(const std::string& a, const std::string& b) {
  auto r = run("diff --json " + a + " " + b);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = json::parse(r.out);
  ASSERT_FALSE(j["tensors"].empty());
  for (const auto& t : j["tensors"]) {
    EXPECT_TRUE(t["in_a"].get<bool>() && t["in_b"].get<bool>()) << t["name"];
    EXPECT_TRUE(t.value("bit_identical", false)) << t.dump();
  }
}

TEST(ExportFolder, ShardsIndexConfigAndRoundTrip) {
  const fs::path d = fs::path(::testing::TempDir()) / "export_folder";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string fix = test_paths::fixtures();

  // NF4 requantized from BF16, in shards of at most 500 KB.
  ASSERT_EQ(run("convert -q " + fix + "llama-bf16 --quant nf4 -o " + (d / "nf4.iris").string()).rc, 0);
  auto r = run("export -q " + (d / "nf4.iris").string() + " -o " + (d / "nf4").string() + "/ --max-shard-size 500KB");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json index = read_json(d / "nf4" / "model.safetensors.index.json");
  std::set<std::string> shards;
  uint64_t shard_bytes = 0;
  for (const auto& [name, shard] : index["weight_map"].items()) shards.insert(shard.get<std::string>());
  EXPECT_GT(shards.size(), 1u);
  for (const auto& s : shards) {
    ASSERT_TRUE(fs::exists(d / "nf4" / s)) << s;
    std::ifstream f(d / "nf4" / s, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), std::streamsize(n));
    const json h = json::parse(header);
    EXPECT_EQ(h["__metadata__"]["format"], "pt") << s;  // transformers refuses other metadata
    for (const auto& [name, t] : h.items()) {
      if (name == "__metadata__") continue;
      EXPECT_EQ(index["weight_map"][name], s) << name;
      shard_bytes += t["data_offsets"][1].get<uint64_t>() - t["data_offsets"][0].get<uint64_t>();
    }
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), shard_bytes);
  const json config = read_json(d / "nf4" / "config.json");
  const json& qc = config["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "bitsandbytes");
  EXPECT_EQ(qc["bnb_4bit_quant_type"], "nf4");
  EXPECT_EQ(qc["load_in_4bit"], true);
  EXPECT_NE(qc["llm_int8_skip_modules"].dump().find("lm_head"), std::string::npos) << qc.dump();
  EXPECT_TRUE(fs::exists(d / "nf4" / "generation_config.json"));
  ASSERT_EQ(run("convert -q " + (d / "nf4").string() + " -o " + (d / "nf4-again.iris").string()).rc, 0);
  expect_same_tensors((d / "nf4-again.iris").string(), (d / "nf4.iris").string());

  // gpt-oss MXFP4 kept: the checkpoint's own quantization_config, one shard.
  ASSERT_EQ(run("convert -q " + fix + "gptoss-mxfp4 -o " + (d / "g.iris").string()).rc, 0);
  ASSERT_EQ(run("export -q " + (d / "g.iris").string() + " -o " + (d / "g").string() + "/").rc, 0);
  EXPECT_TRUE(fs::exists(d / "g" / "model.safetensors"));
  EXPECT_EQ(read_json(d / "g" / "config.json")["quantization_config"], read_json(fix + "gptoss-mxfp4/config.json")["quantization_config"]);
  ASSERT_EQ(run("convert -q " + (d / "g").string() + " -o " + (d / "g-again.iris").string()).rc, 0);
  expect_same_tensors((d / "g-again.iris").string(), (d / "g.iris").string());

  // Dequantized: no quantization_config at all.
  ASSERT_EQ(run("export -q " + (d / "nf4.iris").string() + " --dtype bf16 -o " + (d / "bf16").string() + "/").rc, 0);
  EXPECT_FALSE(read_json(d / "bf16" / "config.json").contains("quantization_config"));

  // FP8 block kept from the checkpoint: its fp8 config.
  ASSERT_EQ(run("convert -q " + fix + "llama-fp8-block -o " + (d / "f.iris").string()).rc, 0);
  ASSERT_EQ(run("export -q " + (d / "f.iris").string() + " -o " + (d / "f").string() + "/").rc, 0);
  EXPECT_EQ(read_json(d / "f" / "config.json")["quantization_config"]["quant_method"], "fp8");
}

TEST(ExportFolder, WhatTransformersCannotLoadIsRefusedLeavingNothing) {
  const fs::path d = fs::path(::testing::TempDir()) / "export_folder_refused";
  fs::remove_all(d);
  fs::create_directories(d);
  ASSERT_EQ(run("convert -q " + test_paths::fixtures() + "llama-bf16 --quant fp8-channel -o " + (d / "c.iris").string()).rc, 0);
  auto r = run("export -q " + (d / "c.iris").string() + " -o " + (d / "c").string() + "/");
  EXPECT_EQ(r.rc, 7) << r.out;
  EXPECT_NE(r.out.find("scaled per channel"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "c"));
  for (const auto& e : fs::directory_iterator(d)) EXPECT_EQ(e.path().filename().string().find("partial"), std::string::npos) << e.path();
  fs::create_directories(d / "exists");
  r = run("export -q " + (d / "c.iris").string() + " --dtype bf16 -o " + (d / "exists").string() + "/");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = run("export -q " + (d / "c.iris").string() + " -o " + (d / "x").string() + "/ --max-shard-size 5XB");
  EXPECT_EQ(r.rc, 2) << r.out;
}

// The source's safetensors __metadata__ survives convert -> export (file and folder), and
// inspect shows it on the snapshot and on the archive.
TEST(ExportFolder, SourceMetadataSurvivesConvertAndExport) {
  const fs::path d = fs::path(::testing::TempDir()) / "export_metadata";
  fs::remove_all(d);
  fs::create_directories(d / "snap");
  std::string header = R"({"__metadata__":{"format":"pt","origin":"unit-test","step":"1200"},"w":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,16]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream f(d / "snap" / "model.safetensors", std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
    for (int i = 0; i < 16; ++i) f.put(char(i + 1));
  }
  std::ofstream(d / "snap" / "config.json") << R"({"model_type": "llama"})";
  auto r = run("inspect " + (d / "snap").string());
  EXPECT_NE(r.out.find(R"("origin":"unit-test")"), std::string::npos) << r.out;
  ASSERT_EQ(run("convert -q " + (d / "snap").string() + " -o " + (d / "a.iris").string()).rc, 0);
  r = run("inspect " + (d / "a.iris").string());
  EXPECT_NE(r.out.find(R"("step":"1200")"), std::string::npos) << r.out;
  auto metadata_of = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string h(n, '\0');
    f.read(h.data(), std::streamsize(n));
    return json::parse(h)["__metadata__"];
  };
  const json want = {{"format", "pt"}, {"origin", "unit-test"}, {"step", "1200"}};
  ASSERT_EQ(run("export -q " + (d / "a.iris").string() + " -o " + (d / "a.safetensors").string()).rc, 0);
  EXPECT_EQ(metadata_of(d / "a.safetensors"), want);
  ASSERT_EQ(run("export -q " + (d / "a.iris").string() + " -o " + (d / "hf").string() + "/").rc, 0);
  EXPECT_EQ(metadata_of(d / "hf" / "model.safetensors"), want);
}

// Embedded file names are the archive's (untrusted) and become paths in the folder: a name
// that is not a plain file name is refused by the writer (and by every reader), and one that
// would replace a file the export writes is refused by export in one line before anything is
// written, inside the folder or outside it.
TEST(ExportFolder, HostileEmbeddedFileNamesAreRefusedWritingNothing) {
  testing_files::TempDir d;
  for (const std::string name : {"../escaped.txt", "/tmp/iris-absolute-escape.txt", "sub/dir.txt", "..", "model.safetensors",
                                 "model.safetensors.index.json"}) {
    SCOPED_TRACE(name);
    fs::remove_all(d.path / "work");
    fs::create_directories(d.path / "work");
    IrisWriter w;
    w.set_model_type("llama");
    TensorDesc t;
    t.name = "w.weight";
    t.shape = {2, 4};
    t.dtype = DType::kBF16;
    w.add_tensor(t, json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(16, 0x3f)); }});
    w.add_file("config.json", R"({"model_type":"llama"})");
    w.add_file(name, "payload");
    const std::string archive = d / "work/a.iris";
    const bool plain = name.find('/') == std::string::npos && name != "..";
    auto written = w.write(archive, {});
    if (!plain) {
      // The writer itself refuses it (the readers do too: tests/api/hostile_test.cpp).
      EXPECT_FALSE(written.is_ok());
      EXPECT_NE(written.status().message().find("not a plain file name"), std::string::npos) << written.status().message();
      for (const auto& e : fs::directory_iterator(d.path / "work")) ADD_FAILURE() << "left behind: " << e.path();
      continue;
    }
    ASSERT_TRUE(written.is_ok()) << written.status().message();
    auto r = run("export " + archive + " -o " + (d / "work/out") + "/");
    EXPECT_EQ(r.rc, 3) << r.out;
    EXPECT_NE(r.out.find("embedded file '" + name + "'"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_FALSE(fs::exists(d / "work/out"));
    EXPECT_FALSE(fs::exists(d / "work/escaped.txt"));
    EXPECT_FALSE(fs::exists("/tmp/iris-absolute-escape.txt"));
    for (const auto& e : fs::directory_iterator(d.path / "work")) EXPECT_EQ(e.path().filename(), "a.iris") << "left behind";
  }
}

}  // namespace
}  // namespace iris
