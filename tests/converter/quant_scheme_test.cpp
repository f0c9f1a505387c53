// Checkpoints in quantization schemes iris does not decode are refused with exit 7 and one
// line naming the scheme, before any tensor is read, and leave no output (issue 24 item 4).
// Each case is the header shape the producing tool writes (compressed-tensors
// mxfp8-quantized, ModelOpt W4A8_AWQ, and the GPTQ / AWQ / compressed-tensors integer
// variants iris has no packing for), with and without the config that declares it; readable
// schemes still convert (NVFP4, compressed-tensors MXFP4 and bitsandbytes LLM.int8 among them
// since 2026-11-30). (The schemes iris reads are checked against oracles in python/tests:
// test_packed_integers.py, test_nvfp4.py, test_ct_mxfp4.py, test_bnb_int8.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "converter/sources/checkpoint_schemes.h"
#include "tests/cli_runner.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using nlohmann::json;

struct Tensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes;
};

void write_checkpoint(const std::string& dir, const std::vector<Tensor>& tensors) {
  json h = json::object();
  std::string data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes}}};
    data.append(t.bytes, '\x01');
  }
  write_st(dir + "/model.safetensors", h.dump(), data);
}

struct SchemeCase {
  std::string label;
  std::vector<Tensor> tensors;
  json quantization_config;  // null: config.json without one
  std::string hf_quant_config;
  std::string named;         // what the one line must name
};

std::vector<SchemeCase> cases() {
  const std::vector<Tensor> packed = {{"m.p.weight_packed", "I32", {4, 1}, 16}, {"m.p.weight_scale", "BF16", {4, 1}, 8},
                                      {"m.p.weight_shape", "I64", {2}, 16}};
  const std::vector<Tensor> mo_nvfp4 = {{"m.p.weight", "U8", {4, 8}, 32}, {"m.p.weight_scale", "F8_E4M3", {4, 1}, 4},
                                        {"m.p.weight_scale_2", "F32", {}, 4}, {"m.p.input_scale", "F32", {}, 4}};
  const std::vector<Tensor> gptq = {{"m.p.qweight", "I32", {1, 8}, 32}, {"m.p.qzeros", "I32", {1, 1}, 4},
                                    {"m.p.scales", "F16", {1, 8}, 16}, {"m.p.g_idx", "I32", {8}, 32}};
  const json w4a16 = {{"quant_method", "compressed-tensors"},
                      {"format", "pack-quantized"},
                      {"config_groups",
                       {{"group_0",
                         {{"targets", {"Linear"}},
                          {"format", "pack-quantized"},
                          {"weights", {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}}}}}}}};
  auto w4a16_bits = [&](int bits) {
    json j = w4a16;
    j["config_groups"]["group_0"]["weights"]["num_bits"] = bits;
    return j;
  };
  json int_quantized = w4a16;
  int_quantized["format"] = "int-quantized";
  int_quantized["config_groups"]["group_0"]["format"] = "int-quantized";
  json nvfp4 = w4a16;
  nvfp4["format"] = "nvfp4-pack-quantized";
  nvfp4["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized";
  nvfp4["config_groups"]["group_0"]["weights"] = {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}};
  json mxfp8 = nvfp4;
  mxfp8["format"] = "mxfp8-quantized";
  mxfp8["config_groups"]["group_0"]["format"] = "mxfp8-quantized";
  mxfp8["config_groups"]["group_0"]["weights"] = {{"num_bits", 8}, {"type", "float"}, {"strategy", "group"}, {"group_size", 32}};
  const std::vector<Tensor> ct_mxfp8 = {{"m.p.weight", "F8_E4M3", {4, 32}, 128}, {"m.p.weight_scale", "U8", {4, 1}, 4}};
  return {
      {"compressed-tensors MXFP8 declared", ct_mxfp8, mxfp8, "", "compressed-tensors format 'mxfp8-quantized'"},
      {"ModelOpt W4A8_AWQ declared", mo_nvfp4, nullptr,
       R"({"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "W4A8_AWQ", "group_size": 128}})",
       "ModelOpt quant_algo 'W4A8_AWQ'"},
      {"GPTQ or AWQ codes without a config to say which", gptq, nullptr, "", "GPTQ or AWQ"},
      {"GPTQ in a width it has no packing for", gptq, {{"quant_method", "gptq"}, {"bits", 5}, {"group_size", 128}}, "", "GPTQ packs 2, 3, 4 or 8 bits"},
      {"GPTQ packed in int16 words", gptq, {{"quant_method", "gptq"}, {"bits", 4}, {"pack_dtype", "int16"}}, "", "pack_dtype 'int16'"},
      {"AWQ GEMV packing", gptq, {{"quant_method", "awq"}, {"bits", 4}, {"version", "gemv"}}, "", "version 'gemv'"},
      {"compressed-tensors 3-bit packed integers", packed, w4a16_bits(3), "", "3-bit int weights"},
      {"compressed-tensors integers stored int-quantized", packed, int_quantized, "", "format 'int-quantized'"},
      {"compressed-tensors int weights stored float-quantized", {{"m.p.weight", "BF16", {4, 8}, 64}},
       {{"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"config_groups", {{"g", {{"weights", {{"num_bits", 8}, {"type", "int"}}}}}}}},
       "",
       "8-bit int weights"},
  };
}

void PrintTo(const SchemeCase& c, std::ostream* os) { *os << c.label; }

class UndecodableScheme : public ::testing::TestWithParam<SchemeCase> {};

TEST_P(UndecodableScheme, IsRefusedWithExit7NamingItAndNoOutput) {
  const SchemeCase& c = GetParam();
  TempDir d;
  write_checkpoint(d / "snap", c.tensors);
  json config = {{"model_type", "llama"}};
  if (!c.quantization_config.is_null()) config["quantization_config"] = c.quantization_config;
  write_bytes(d / "snap/config.json", config.dump());
  if (!c.hf_quant_config.empty()) write_bytes(d / "snap/hf_quant_config.json", c.hf_quant_config);
  for (const char* extra : {"", " --quant nf4"}) {
    auto r = run("convert " + d / "snap" + " -o " + d / "out.iris -q" + extra);
    EXPECT_EQ(r.rc, 7) << c.label << extra << ": " << r.out;
    EXPECT_NE(r.out.find(c.named), std::string::npos) << c.label << extra << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.label << ": one line: " << r.out;
    EXPECT_FALSE(std::filesystem::exists(d / "out.iris")) << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, UndecodableScheme, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<SchemeCase>& i) { return "case" + std::to_string(i.index); });

// NVFP4 in both tools' layouts, declared or known by its companions alone, converts (its
// values are checked against the tools' own in python/tests/test_nvfp4.py).
TEST(ReadableScheme, Nvfp4OfBothToolsConverts) {
  const std::vector<Tensor> ct_nvfp4 = {{"m.p.weight_packed", "U8", {4, 8}, 32}, {"m.p.weight_scale", "F8_E4M3", {4, 1}, 4},
                                        {"m.p.weight_global_scale", "F32", {1}, 4}, {"m.p.input_global_scale", "F32", {1}, 4}};
  const std::vector<Tensor> mo_nvfp4 = {{"m.p.weight", "U8", {4, 8}, 32}, {"m.p.weight_scale", "F8_E4M3", {4, 1}, 4},
                                        {"m.p.weight_scale_2", "F32", {}, 4}, {"m.p.input_scale", "F32", {}, 4}};
  const json ct_config = {{"quant_method", "compressed-tensors"},
                          {"format", "nvfp4-pack-quantized"},
                          {"config_groups",
                           {{"group_0",
                             {{"format", "nvfp4-pack-quantized"},
                              {"weights", {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}}}}}}}};
  const std::string mo_hf = R"({"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}})";
  struct Case {
    const char* label;
    std::vector<Tensor> tensors;
    json qc;
    std::string hf;
  };
  for (const Case& c : {Case{"ct declared", ct_nvfp4, ct_config, ""}, Case{"ct by its global scale", ct_nvfp4, nullptr, ""},
                        Case{"modelopt declared", mo_nvfp4, nullptr, mo_hf}, Case{"modelopt by its second scale", mo_nvfp4, nullptr, ""}}) {
    TempDir d;
    write_checkpoint(d / "snap", c.tensors);
    json config = {{"model_type", "llama"}};
    if (!c.qc.is_null()) config["quantization_config"] = c.qc;
    write_bytes(d / "snap/config.json", config.dump());
    if (!c.hf.empty()) write_bytes(d / "snap/hf_quant_config.json", c.hf);
    auto r = run("convert " + d / "snap" + " -o " + d / "out.iris -q");
    EXPECT_EQ(r.rc, 0) << c.label << ": " << r.out;
    r = run("inspect " + d / "out.iris");
    EXPECT_NE(r.out.find("nvfp4"), std::string::npos) << c.label << ": " << r.out;
  }
}

// bitsandbytes LLM.int8, declared or known by its SCB alone, converts as int_group (its values
// against bitsandbytes' own in python/tests/test_bnb_int8.py); its codes without their SCB, in
// a checkpoint that declares it, are refused rather than read as a tensor of integers.
TEST(ReadableScheme, LlmInt8ConvertsAndItsCodesAloneAreRefused) {
  // (write_checkpoint fills every byte with 1: a weight_format of 1, col32, would be refused; it is optional.)
  const std::vector<Tensor> int8 = {{"m.p.weight", "I8", {4, 8}, 32}, {"m.p.SCB", "F32", {4}, 16}};
  const json declared = {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}, {"_load_in_8bit", true}};
  for (bool with_config : {true, false}) {
    TempDir d;
    write_checkpoint(d / "snap", int8);
    json config = {{"model_type", "llama"}};
    if (with_config) config["quantization_config"] = declared;
    write_bytes(d / "snap/config.json", config.dump());
    auto r = run("convert " + d / "snap" + " -o " + d / "out.iris -q");
    EXPECT_EQ(r.rc, 0) << r.out;
    r = run("inspect " + d / "out.iris");
    EXPECT_NE(r.out.find("int_group"), std::string::npos) << r.out;
  }
  TempDir d;
  write_checkpoint(d / "snap", {int8[0]});
  write_bytes(d / "snap/config.json", json{{"model_type", "llama"}, {"quantization_config", declared}}.dump());
  auto r = run("convert " + d / "snap" + " -o " + d / "out.iris -q");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("without their 'm.p.SCB'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(d / "out.iris"));
}

// The schemes iris reads are not refused by the same check: compressed-tensors FP8
// (float-quantized, channel scales) and a ModelOpt FP8 hf_quant_config.
TEST(ReadableScheme, CompressedTensorsFp8AndModelOptFp8Convert) {
  TempDir d;
  write_checkpoint(d / "ct", {{"m.p.weight", "F8_E4M3", {4, 8}, 32}, {"m.p.weight_scale", "F32", {4, 1}, 16}});
  const json ct = {{"model_type", "llama"},
                   {"quantization_config",
                    {{"quant_method", "compressed-tensors"},
                     {"format", "float-quantized"},
                     {"config_groups", {{"group_0", {{"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}}}}}}}}}};
  write_bytes(d / "ct/config.json", ct.dump());
  auto r = run("convert " + d / "ct" + " -o " + d / "ct.iris -q");
  EXPECT_EQ(r.rc, 0) << r.out;

  write_checkpoint(d / "mo", {{"m.p.weight", "F8_E4M3", {4, 8}, 32}, {"m.p.weight_scale", "F32", {}, 4}});
  write_bytes(d / "mo/config.json", R"({"model_type": "llama"})");
  write_bytes(d / "mo/hf_quant_config.json", R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})");
  auto m = run("convert " + d / "mo" + " -o " + d / "mo.iris -q");
  EXPECT_EQ(m.rc, 0) << m.out;
}

// The scheme table (converter/sources/checkpoint_schemes.h): a decoded scheme is described
// whole, and a companion's name ending tells one scheme only.
TEST(CheckpointSchemes, EachIsDescribedWholeAndEachCompanionTellsOneScheme) {
  std::vector<std::string> suffixes;
  for (const auto* scheme : checkpoint_schemes()) {
    const CheckpointScheme& s = *scheme;
    SCOPED_TRACE(s.name);
    EXPECT_FALSE(s.companion_suffixes.empty());
    if (s.decoded) {
      EXPECT_TRUE(s.group_of && s.group && s.check_unclaimed);
      EXPECT_FALSE(s.quant_methods.empty());
    } else {
      EXPECT_FALSE(s.group_of || s.group || s.check_unclaimed);
    }
    for (const char* x : s.companion_suffixes) suffixes.push_back(x);
  }
  for (size_t i = 0; i < suffixes.size(); ++i)
    for (size_t j = 0; j < suffixes.size(); ++j)
      if (i != j) {
        EXPECT_FALSE(suffixes[i].ends_with(suffixes[j])) << suffixes[i] << " also ends with " << suffixes[j];
      }
}

}  // namespace
}  // namespace iris
