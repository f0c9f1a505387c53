// The two manifest readers of formats/manifest_text.h agree: the fast one reads the writer's
// spelling into the same manifest as the reference reader, never accepts a text the reference
// refuses, and read_manifest() answers what the reference answers, message for message,
// whatever the text: the writer's manifest edited line by line and token by token, and
// mutated at random.
#include <gtest/gtest.h>

#include <random>

#include "common/checked_math.h"
#include "formats/iris_preamble.h"
#include "formats/json_scan.h"
#include "formats/manifest_text.h"

namespace iris {
namespace {

using nlohmann::json;

constexpr uint16_t kMajor = kIrisVersionMajor, kMinor = kIrisVersionMinor;

// Every format and layout, source records with and without extra keys, params of every JSON
// kind (strings, integers, a float, a bool, a list), an empty tensor and a scalar.
Manifest sample(uint64_t* data_size) {
  Manifest m;
  m.model_type = "test";
  m.tool = {{"name", "iris"}, {"version", "0.3.0"}};
  m.provenance = {{"options", {{"rules", {"\\.w2\\.weight$=mxfp4"}}}}, {"note", "tab\there, a \"quote\" and caf\u00e9"}};
  uint64_t cursor = 0;
  auto add = [&](TensorDesc d, json source) {
    if (is_quantized(d.format)) d.layout = choose_layout(d, 16, 64);
    auto specs = component_specs(d);
    if (!specs.is_ok()) throw std::runtime_error(specs.status().message());
    ArchiveTensor t;
    t.desc = std::move(d);
    for (auto& s : *specs) {
      t.components.push_back({s, cursor, 0x0123456789abcdefull + cursor});
      cursor = round_up(cursor + s.bytes, kIrisAlignment);
    }
    if (!source.is_null()) t.source = std::move(source);
    m.tensors.push_back(std::move(t));
  };
  auto desc = [](std::string name, std::vector<uint64_t> shape, DType dt, Format f, json params) {
    TensorDesc d;
    d.name = std::move(name);
    d.shape = std::move(shape);
    d.dtype = dt;
    d.format = f;
    d.params = std::move(params);
    return d;
  };
  const json part = {{"role", "data"}, {"name", "a"}, {"dtype", "BF16"}, {"shape", {3, 5}}, {"file", "model.safetensors"}};
  add(desc("a", {3, 5}, DType::kBF16, Format::kRaw, json::object()), {{"tensors", {part}}});
  add(desc("empty", {0, 4}, DType::kBF16, Format::kRaw, json::object()), nullptr);
  add(desc("scalar", {}, DType::kF32, Format::kRaw, json::object()), json::object());
  add(desc("layers.0.mlp.experts.w2.weight", {2, 17, 96}, DType::kBF16, Format::kMxfp4,
           {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}}),
      {{"requantized_from", "bf16"},
       {"tensors", {{{"role", "codes"}, {"name", "w_blocks"}, {"dtype", "U8"}, {"shape", {2, 17, 3, 16}}},
                    {{"role", "scales"}, {"name", "w_scales"}, {"dtype", "U8"}, {"shape", {2, 17, 3}}}}},
       {"state", 3},
       {"note", {{"a", {1, "x\"y", nullptr, true, 2.5}}}}});
  add(desc("nf4.weight", {4096}, DType::kBF16, Format::kNf4,
           {{"block_size", 64}, {"double_quant", true}, {"nested_block_size", 256}, {"nested_offset", 0.03125},
            {"nested_offset_f32_bits", "0x3d000000"}, {"nibble_order", "high_first"}, {"quant_state_bytes", 100}}),
      nullptr);
  add(desc("fp8.weight", {32, 64}, DType::kBF16, Format::kFp8E4M3,
           {{"scale_granularity", "tensor"}, {"scale_dtype", "f32"}, {"scale_shape", {1}}, {"scale_name", "weight_scale"}}),
      {{"tensors", {{{"role", "codes"}, {"name", "fp8.weight"}, {"dtype", "F8_E4M3"}, {"shape", {32, 64}}}}}});
  m.files.push_back({"config.json", "zstd", cursor, 10, 20, 0x1234});
  *data_size = cursor + 10;
  return m;
}

std::string sample_text(uint64_t* data_size) { return manifest_to_json(sample(data_size)).dump(1); }

// What read_manifest_parsed() returns, as text: the manifest, or the message.
std::string verdict(const Result<Manifest>& m) {
  return m.is_ok() ? "ok: " + manifest_to_json(*m).dump(-1, ' ', false, json::error_handler_t::replace)
                   : "refused: " + m.status().message();
}

// The fast reader accepts only what the reference accepts, reading the same manifest; the
// reader archives use answers as the reference does. True when the fast reader accepted.
bool expect_agree(const std::string& text, uint64_t data_size) {
  TensorIndex fast_index, index;
  const auto fast = read_manifest_fast(text, data_size, kMajor, kMinor, "x.iris", &fast_index);
  const std::string reference = verdict(read_manifest_parsed(text, data_size, kMajor, kMinor, "x.iris"));
  if (fast) {
    EXPECT_EQ(verdict(*fast), reference) << text;
  }
  EXPECT_EQ(verdict(read_manifest(text, data_size, kMajor, kMinor, "x.iris", &index)), reference) << text;
  return fast.has_value();
}

TEST(ManifestFast, ReadsTheWritersSpellingIntoTheSameManifest) {
  uint64_t data_size;
  const Manifest m = sample(&data_size);
  const std::string text = manifest_to_json(m).dump(1);
  EXPECT_TRUE(expect_agree(text, data_size));
  EXPECT_TRUE(expect_agree(manifest_to_json(m).dump(), data_size));  // and without whitespace
  TensorIndex index;
  auto fast = read_manifest_fast(text, data_size, kMajor, kMinor, "x.iris", &index);
  ASSERT_TRUE(fast.has_value());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    EXPECT_EQ(index.find(fast->tensors, m.tensors[i].desc.name), i);
    EXPECT_EQ(fast->tensors[i].source.json(), m.tensors[i].source.json());
    EXPECT_EQ(fast->tensors[i].desc.params.dump(), m.tensors[i].desc.params.dump());  // the same JSON kinds
  }
  EXPECT_EQ(index.find(fast->tensors, "nope"), std::nullopt);
}

// Valid texts the fast reader does not read itself: the reference reader reads them.
TEST(ManifestFast, OtherSpellingsAreLeftToTheReferenceReader) {
  uint64_t data_size;
  Manifest m = sample(&data_size);
  m.tensors[0].desc.name = "w\u00e9ight";  // not ASCII
  EXPECT_FALSE(expect_agree(manifest_to_json(m).dump(1), data_size));
  json j = manifest_to_json(sample(&data_size));
  j["tensors"][0]["comment"] = "a key the writer does not write";
  EXPECT_FALSE(expect_agree(j.dump(1), data_size));
  std::string text = sample_text(&data_size);
  const size_t name = text.find("\"scalar\"");
  EXPECT_FALSE(expect_agree(text.replace(name, 8, "\"sc\\u0061lar\""), data_size));  // an escape
}

// A value the full parser reads keeps the whole text within 64 levels.
TEST(ManifestFast, DepthCountsFromTheDocument) {
  uint64_t data_size;
  for (int depth : {59, 60, 61}) {  // the record is at depth 4: 4 + 60 = 64
    json j = manifest_to_json(sample(&data_size));
    j["tensors"][0]["source"]["deep"] = json::parse(std::string(size_t(depth), '[') + std::string(size_t(depth), ']'));
    EXPECT_EQ(expect_agree(j.dump(1), data_size), depth <= 60) << depth;
  }
}

// A byte-order mark mid-text is no value, though nlohmann skips one at the start of a text.
TEST(ManifestFast, AByteOrderMarkBeforeAValueIsRefused) {
  uint64_t data_size;
  std::string text = sample_text(&data_size);
  const std::string model_type = "\"model_type\": ";
  text.insert(text.find(model_type) + model_type.size(), "\xEF\xBB\xBF");
  EXPECT_FALSE(expect_agree(text, data_size));
}

TEST(ManifestFast, EachLineDeletedOrRepeated) {
  uint64_t data_size;
  const std::string text = sample_text(&data_size);
  std::vector<size_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') starts.push_back(i + 1);
  starts.push_back(text.size());
  for (size_t l = 0; l + 1 < starts.size(); ++l) {
    const std::string line = text.substr(starts[l], starts[l + 1] - starts[l]);
    expect_agree(text.substr(0, starts[l]) + text.substr(starts[l + 1]), data_size);
    expect_agree(text.substr(0, starts[l + 1]) + line + text.substr(starts[l + 1]), data_size);
  }
}

// Every number and every string respelled: other integers, floats, signs, escapes, bytes past ASCII.
TEST(ManifestFast, EachTokenRespelled) {
  uint64_t data_size;
  const std::string text = sample_text(&data_size);
  const std::vector<std::string> numbers = {"0", "1", "4095", "4097", "65536", "00", "01", "-0", "1.0", "4096.0", "1e3", "4096E0", "-4096",
                                            "18446744073709551615", "18446744073709551616", "281474976710656", "true", "\"7\""};
  const std::vector<std::string> strings = {"\"\"", "\"\\u0061\"", "\"a\\/b\"", "\"\\\"\"", "\"caf\xC3\xA9\"", "\"\xC3\"",
                                            "\"tab\there\"", "7", "null", "{}", "[]"};
  size_t count = 0;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      size_t end = i + 1;
      while (text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      ++end;
      for (const auto& s : strings) expect_agree(text.substr(0, i) + s + text.substr(end), data_size);
      i = end;
      ++count;
    } else if (text[i] >= '0' && text[i] <= '9') {
      size_t end = i;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      for (const auto& n : numbers) expect_agree(text.substr(0, i) + n + text.substr(end), data_size);
      i = end;
      ++count;
    } else {
      ++i;
    }
  }
  EXPECT_GT(count, 300u);
}

TEST(ManifestFast, RandomMutations) {
  uint64_t data_size;
  const std::string text = sample_text(&data_size);
  const std::string alphabet = "{}[]:,\"\\ \t\n0123456789-.eE+tfnulrsax\x7f\x80\xC3";
  std::mt19937 rng(24);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  size_t accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string t = text;
    for (int e = 0, edits = 1 + int(pick(3)); e < edits; ++e) {
      const size_t at = pick(t.size());
      switch (pick(4)) {
        case 0: t.erase(at, 1 + pick(3)); break;
        case 1: t.insert(at, 1, alphabet[pick(alphabet.size())]); break;
        case 2: t[at] = alphabet[pick(alphabet.size())]; break;
        default: t.insert(pick(t.size()), t.substr(at, 1 + pick(40))); break;
      }
    }
    accepted += expect_agree(t, data_size);
  }
  EXPECT_GT(accepted, 0u);  // some mutations keep the manifest valid (whitespace, hash digits)
}

TEST(JsonCursor, ReadsOnlyThePlainestSpelling) {
  const auto uint_of = [](std::string_view s) -> std::optional<uint64_t> {
    JsonCursor c(s);
    uint64_t v;
    if (!c.uint(&v)) {
      EXPECT_EQ(c.offset(), std::min(s.find_first_not_of(" \n"), s.size())) << s;  // left where the value starts
      return std::nullopt;
    }
    return v;
  };
  EXPECT_EQ(uint_of("0"), 0u);
  EXPECT_EQ(uint_of(" 4096,"), 4096u);
  EXPECT_EQ(uint_of("18446744073709551615"), UINT64_MAX);
  for (const char* s : {"18446744073709551616", "01", "-1", "1.5", "1e3", "", "x"}) EXPECT_EQ(uint_of(s), std::nullopt) << s;
  std::string_view v;
  EXPECT_TRUE(JsonCursor("\"a b\"").string(&v));
  EXPECT_EQ(v, "a b");
  for (const char* s : {"\"a\\\"\"", "\"\xC3\xA9\"", "\"a", "\"\t\""}) EXPECT_FALSE(JsonCursor(s).string(&v)) << s;
  std::string compact;
  json_without_whitespace("{ \"a b\" : [1, \"c \\\" d\"] }", &compact);
  EXPECT_EQ(compact, "{\"a b\":[1,\"c \\\" d\"]}");
}

}  // namespace
}  // namespace iris
