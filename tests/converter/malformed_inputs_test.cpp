// The catalogue of malformed inputs: each one must give the right error kind and a one-line
// message naming the file (and the tensor, where there is one) -- never a crash, never OK.
#include <gtest/gtest.h>

#include <functional>

#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;

struct Malformed {
  std::string name;
  // Writes the input into the folder and returns what to open.
  std::function<std::string(const TempDir&)> make;
  std::string expect;  // a distinctive part of the message
};

std::string one_file(const TempDir& d, const std::string& header, const std::string& data) {
  write_st(d / "model.safetensors", header, data);
  return d / "model.safetensors";
}

const std::string kOk = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

std::vector<Malformed> catalogue() {
  std::vector<Malformed> c = {
      {"shorter than 8 bytes", [](const TempDir& d) { write_bytes(d / "m.safetensors", "abc"); return d / "m.safetensors"; },
       "shorter than the 8-byte header length"},
      {"header length past EOF", [](const TempDir& d) { write_bytes(d / "m.safetensors", st_bytes("{}", "", 1000)); return d / "m.safetensors"; },
       "runs past the end"},
      {"header length u64 max", [](const TempDir& d) { write_bytes(d / "m.safetensors", st_bytes("{}", "", UINT64_MAX - 1)); return d / "m.safetensors"; },
       "exceeds the 100000000-byte limit"},
      {"header length over 100 MB", [](const TempDir& d) { write_bytes(d / "m.safetensors", st_bytes("{}", "", 100'000'001)); return d / "m.safetensors"; },
       "exceeds the 100000000-byte limit"},
      {"invalid JSON", [](const TempDir& d) { return one_file(d, "{\"a\":", ""); }, "invalid JSON"},
      {"JSON nested 10000 deep", [](const TempDir& d) { return one_file(d, std::string(10000, '[') + std::string(10000, ']'), ""); },
       "nested deeper than 64"},
      {"header is an array", [](const TempDir& d) { return one_file(d, "[1,2]", ""); }, "not a JSON object"},
      {"non-string metadata value", [](const TempDir& d) { return one_file(d, R"({"__metadata__":{"format":1}})", ""); },
       "__metadata__ value of 'format' is not a string"},
      {"metadata not an object", [](const TempDir& d) { return one_file(d, R"({"__metadata__":"pt"})", ""); }, "__metadata__ is not an object"},
      {"unknown dtype", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}})", "xx"); },
       "tensor 'w': unknown dtype 'F12'"},
      {"negative dim", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "x"); },
       "tensor 'w': shape dimension -1"},
      {"fractional dim", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "x"); },
       "tensor 'w': shape dimension 1.5"},
      {"dim of 2^48", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"U8","shape":[281474976710656],"data_offsets":[0,1]}})", "x"); },
       "not an integer in [0, 2^48)"},
      {"element count overflows", [](const TempDir& d) {
         return one_file(d, R"({"w":{"dtype":"F32","shape":[281474976710655,281474976710655],"data_offsets":[0,4]}})", "xxxx"); },
       "tensor 'w': element count overflows"},
      {"overlapping offsets", [](const TempDir& d) {
         return one_file(d, R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", "xxxxxx"); },
       "overlaps the previous tensor"},
      {"gap between tensors", [](const TempDir& d) {
         return one_file(d, R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", "xxxxxx"); },
       "tensor 'b': data_offsets begin 4 leaves a gap"},
      {"truncated data", [](const TempDir& d) { return one_file(d, kOk, "xxxx"); }, "(truncated file?)"},
      {"trailing bytes", [](const TempDir& d) { return one_file(d, kOk, std::string(12, 'x')); }, "(trailing bytes)"},
      {"size disagrees with shape", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "xxxxxxxx"); },
       "tensor 'w': data_offsets span 8 bytes but shape and dtype need 12"},
      {"odd F4 element count", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "xx"); },
       "tensor 'w': 3 elements of F4 do not fill whole bytes"},
      {"duplicate name in a header", [](const TempDir& d) {
         return one_file(d, R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"); },
       "duplicate key 'w'"},
      {"end before begin", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}})", "x"); },
       "tensor 'w': data_offsets end 0 is before begin 1"},
      {"missing data_offsets", [](const TempDir& d) { return one_file(d, R"({"w":{"dtype":"U8","shape":[1]}})", "x"); },
       "tensor 'w': entry needs 'dtype', 'shape' and 'data_offsets'"},
      {"index points to a missing shard", [](const TempDir& d) {
         write_st(d / "model-1.safetensors", kOk, "xxxxxxxx");
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors"}})");
         return d.path.string(); },
       "shard 'model-2.safetensors' listed in weight_map is missing"},
      {"index points outside the folder", [](const TempDir& d) {
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
         return d.path.string(); },
       "tensor 'a' to '../elsewhere.safetensors', outside the snapshot folder"},
      {"index points to an absolute path", [](const TempDir& d) {
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"/etc/passwd"}})");
         return d.path.string(); },
       "outside the snapshot folder"},
      {"duplicate names across shards", [](const TempDir& d) {
         write_st(d / "s1.safetensors", kOk, "xxxxxxxx");
         write_st(d / "s2.safetensors", kOk, "yyyyyyyy");
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
         return d.path.string(); },
       "tensor 'a' is also in"},
      {"weight_map names a tensor its shard lacks", [](const TempDir& d) {
         write_st(d / "s1.safetensors", kOk, "xxxxxxxx");
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","zz":"s1.safetensors"}})");
         return d.path.string(); },
       "weight_map says tensor 'zz' is in 's1.safetensors', which lacks it"},
      {"index without weight_map", [](const TempDir& d) {
         write_bytes(d / "model.safetensors.index.json", R"({"metadata":{}})");
         return d.path.string(); },
       "no 'weight_map' object"},
      {"config.json not JSON", [](const TempDir& d) {
         one_file(d, kOk, "xxxxxxxx");
         write_bytes(d / "config.json", "{model_type: llama}");
         return d.path.string(); },
       "config.json: invalid JSON"},
      {"quantization_config not an object", [](const TempDir& d) {
         one_file(d, kOk, "xxxxxxxx");
         write_bytes(d / "config.json", R"({"model_type":"llama","quantization_config":"fp8"})");
         return d.path.string(); },
       "'quantization_config' is not an object"},
      {"MXFP4 blocks without scales", [](const TempDir& d) {
         return one_file(d, R"({"e.gate_up_proj_blocks":{"dtype":"U8","shape":[1,2,1,16],"data_offsets":[0,32]}})", std::string(32, 'x')); },
       "tensor 'e.gate_up_proj_blocks': MXFP4 blocks without their 'e.gate_up_proj_scales' companion"},
      {"MXFP4 scales without blocks", [](const TempDir& d) {
         return one_file(d, R"({"e.down_proj_scales":{"dtype":"U8","shape":[1,2,1],"data_offsets":[0,2]}})", "xx"); },
       "tensor 'e.down_proj_scales': MXFP4 scales without their 'e.down_proj_blocks' companion"},
      {"MXFP4 scales shape mismatch", [](const TempDir& d) {
         return one_file(d, R"({"e.x_blocks":{"dtype":"U8","shape":[2,1,16],"data_offsets":[0,32]},"e.x_scales":{"dtype":"U8","shape":[2,2],"data_offsets":[32,36]}})",
                         std::string(36, 'x')); },
       "tensor 'e.x_scales': shape [2,2] does not match blocks [2,1,16]"},
      {"bnb absmax without quant_state", [](const TempDir& d) {
         return one_file(d, R"({"p.weight":{"dtype":"U8","shape":[2,1],"data_offsets":[0,2]},"p.weight.absmax":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                         std::string(6, 'x')); },
       "tensor 'p.weight.absmax': bitsandbytes companion without a quant_state"},
      {"bnb quant_state not JSON", [](const TempDir& d) {
         return one_file(d, R"({"p.weight":{"dtype":"U8","shape":[2,1],"data_offsets":[0,2]},"p.weight.quant_state.bitsandbytes__nf4":{"dtype":"U8","shape":[3],"data_offsets":[2,5]}})",
                         "xx{{{"); },
       "quant_state: invalid JSON"},
      {"bnb shape disagrees with packed bytes", [](const TempDir& d) {
         std::string qs = R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [8, 8]})";
         std::string h = R"({"p.weight":{"dtype":"U8","shape":[2,1],"data_offsets":[0,2]},"p.weight.quant_state.bitsandbytes__nf4":{"dtype":"U8","shape":[)" +
                         std::to_string(qs.size()) + R"(],"data_offsets":[2,)" + std::to_string(2 + qs.size()) + "]}}";
         return one_file(d, h, "xx" + qs); },
       "tensor 'p.weight': packed 4-bit weight holds 2 bytes of U8; quant_state shape [8,8] needs 32 U8 bytes"},
      {"tensor name holding a NUL", [](const TempDir& d) {
         return one_file(d, R"({"x\u0000a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"x\u0000b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "xxxx"); },
       "tensor 'x\\x00a': name contains a NUL character"},
      {"FP8 scale without its weight", [](const TempDir& d) {
         return one_file(d, R"({"p.weight_scale_inv":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}})", "xxxx"); },
       "tensor 'p.weight_scale_inv': FP8 scale without its weight 'p.weight'"},
      {"FP8 block grid mismatch", [](const TempDir& d) {
         return one_file(d, R"({"p.weight":{"dtype":"F8_E4M3","shape":[2,300],"data_offsets":[0,600]},"p.weight_scale_inv":{"dtype":"F32","shape":[1,2],"data_offsets":[600,608]}})",
                         std::string(608, 'x')); },
       "tensor 'p.weight_scale_inv': shape [1,2] is not the 128x128 block grid [1,3]"},
      {"scale beside a non-FP8 weight", [](const TempDir& d) {
         return one_file(d, R"({"p.weight":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]},"p.weight_scale":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                         std::string(6, 'x')); },
       "tensor 'p.weight': has a scale companion 'p.weight_scale' but dtype BF16"},
      {"FP8 weight without a scale", [](const TempDir& d) {
         one_file(d, R"({"p.weight":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]}})", "xxxx");
         write_bytes(d / "config.json", R"({"model_type":"llama","quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}})");
         return d.path.string(); },
       "tensor 'p.weight': F8_E4M3 tensor without a 'p.weight_scale_inv' or 'p.weight_scale' companion"},
      {"FP8 E5M2 weight without a scale, no config", [](const TempDir& d) {
         return one_file(d, R"({"p.weight":{"dtype":"F8_E5M2","shape":[2,2],"data_offsets":[0,4]}})", "xxxx"); },
       "F8_E5M2 tensor without a 'p.weight_scale_inv'"},
      {"bitsandbytes weight without quant_state", [](const TempDir& d) {
         one_file(d, R"({"p.weight":{"dtype":"U8","shape":[8,1],"data_offsets":[0,8]}})", "xxxxxxxx");
         write_bytes(d / "config.json", R"({"model_type":"llama","quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true}})");
         return d.path.string(); },
       "tensor 'p.weight': packed bitsandbytes weight without its quant_state companion"},
      {"config.json a broken symlink (HF cache layout)", [](const TempDir& d) {
         one_file(d, kOk, "xxxxxxxx");
         std::filesystem::create_symlink("../../blobs/0123abc", d / "config.json");
         return d.path.string(); },
       "config.json: cannot be read (a broken or looping symlink"},
      {"tokenizer.json a looping symlink", [](const TempDir& d) {
         one_file(d, kOk, "xxxxxxxx");
         std::filesystem::create_symlink("tokenizer.json", d / "tokenizer.json");
         return d.path.string(); },
       "tokenizer.json: cannot be read (a broken or looping symlink"},
      {"tokenizer.json a folder", [](const TempDir& d) {
         one_file(d, kOk, "xxxxxxxx");
         std::filesystem::create_directory(d / "tokenizer.json");
         return d.path.string(); },
       "tokenizer.json: not a regular file"},
      {"tensor name of 1 MiB", [](const TempDir& d) {
         return one_file(d, "{\"" + std::string(1 << 20, 'x') + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"); },
       "a tensor name of 1048576 bytes exceeds the 4096-byte limit"},
      {"duplicate key in a tensor entry", [](const TempDir& d) {
         return one_file(d, R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", "x"); },
       "duplicate key 'dtype'"},
      {"weight_map with a duplicate key", [](const TempDir& d) {
         write_st(d / "s1.safetensors", kOk, "xxxxxxxx");
         write_bytes(d / "model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}})");
         return d.path.string(); },
       "duplicate key 'a'"},
      {"FP8 weight_block_size [0, 0]", [](const TempDir& d) {
         one_file(d, R"({"p.weight":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]},"p.weight_scale_inv":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}})",
                  std::string(8, 'x'));
         write_bytes(d / "config.json", R"({"model_type":"llama","quantization_config":{"quant_method":"fp8","weight_block_size":[0,0]}})");
         return d.path.string(); },
       "config.json: quantization_config.weight_block_size [0,0] is not two block sizes"},
      {"MXFP4 stack with K = 2^52 and no rows", [](const TempDir& d) {
         return one_file(d, R"({"e.x_blocks":{"dtype":"U8","shape":[1,0,140737488355328,16],"data_offsets":[0,0]},)"
                            R"("e.x_scales":{"dtype":"U8","shape":[1,0,140737488355328],"data_offsets":[0,0]}})", ""); },
       "has a dimension of 2^48 or more"},
      {"folder without safetensors", [](const TempDir& d) { write_bytes(d / "config.json", "{}"); return d.path.string(); },
       "no .safetensors file and no model.safetensors.index.json"},
  };
  return c;
}

class MalformedInput : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedInput, IsRejectedWithOneLineErrorNamingTheFile) {
  TempDir d;
  const std::string src = GetParam().make(d);
  auto snap = Snapshot::open(src);
  Status s = snap.status();
  if (s.is_ok()) s = group_source_tensors(*snap).status();
  ASSERT_FALSE(s.is_ok()) << GetParam().name << ": accepted";
  EXPECT_EQ(s.kind(), ErrorKind::kInvalidInput) << s.message();
  EXPECT_NE(s.message().find(GetParam().expect), std::string::npos) << "message: " << s.message();
  EXPECT_NE(s.message().find(d.path.string()), std::string::npos) << "does not name the file: " << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "not one line: " << s.message();
}

INSTANTIATE_TEST_SUITE_P(Catalogue, MalformedInput, ::testing::ValuesIn(catalogue()),
                         [](const ::testing::TestParamInfo<Malformed>& i) {
                           std::string n;
                           for (char ch : i.param.name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

// Unscaled FP8 is kept raw only when asked, and a GPTQ/AWQ companion is "unsupported", not raw.
TEST(QuantizedLookingTensors, UnscaledFp8OnRequestAndUnknownSchemesRefused) {
  TempDir d;
  one_file(d, R"({"p.weight":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]}})", "xxxx");
  auto snap = Snapshot::open(d.path.string());
  ASSERT_TRUE(snap.is_ok()) << snap.status().message();
  EXPECT_FALSE(group_source_tensors(*snap).is_ok());
  auto raw = group_source_tensors(*snap, GroupingOptions{true, {}});
  ASSERT_TRUE(raw.is_ok()) << raw.status().message();
  ASSERT_EQ(raw->size(), 1u);
  EXPECT_EQ((*raw)[0].desc.format, Format::kRaw);

  TempDir g;
  one_file(g, R"({"p.qweight":{"dtype":"I32","shape":[1,2],"data_offsets":[0,8]}})", std::string(8, 'x'));
  auto gs = Snapshot::open(g.path.string());
  ASSERT_TRUE(gs.is_ok());
  auto r = group_source_tensors(*gs);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(r.status().message().find("tensor 'p.qweight'"), std::string::npos) << r.status().message();
}

TEST(MalformedInputCatalogue, HasAtLeastTwentyCases) { EXPECT_GE(catalogue().size(), 20u); }

}  // namespace
}  // namespace iris
