// The .iris writer and reader: round trips, tile permutation, and rejection of bad
// manifests and preambles.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>

#include "common/hashing.h"
#include "formats/iris_archive.h"
#include "formats/iris_writer.h"
#include "formats/json_limits.h"
#include "formats/manifest_text.h"
#include "formats/tile_layout.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using nlohmann::json;

ComponentProducer bytes_producer(std::vector<uint8_t> b) {
  return [b = std::move(b)](ByteSink& s) { return s.write(b); };
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng());
  return v;
}

TensorDesc raw(const std::string& name, std::vector<uint64_t> shape, DType dt = DType::kBF16) {
  TensorDesc d;
  d.name = name;
  d.shape = std::move(shape);
  d.dtype = dt;
  return d;
}

TensorDesc mxfp4(const std::string& name, std::vector<uint64_t> shape, uint64_t tn, uint64_t tk) {
  TensorDesc d = raw(name, std::move(shape));
  d.format = Format::kMxfp4;
  d.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  d.layout = {LayoutKind::kTiled, tn, tk};
  return d;
}

// Writes a small archive and returns its path.
std::string write_sample(const TempDir& d, std::map<std::string, std::vector<uint8_t>>* written = nullptr) {
  IrisWriter w;
  w.set_model_type("test");
  std::map<std::string, std::vector<uint8_t>> data;
  auto add = [&](TensorDesc desc) {
    auto specs = component_specs(desc).value();
    std::vector<ComponentProducer> prods;
    for (const auto& s : specs) {
      auto b = random_bytes(s.bytes, uint32_t(s.bytes + desc.name.size()));
      data[desc.name + "/" + role_name(s.role)] = b;
      prods.push_back(bytes_producer(b));
    }
    w.add_tensor(desc, json::object(), std::move(prods));
  };
  add(raw("a", {3, 5}));
  add(raw("empty", {0, 4}));
  add(raw("scalar", {}, DType::kF32));
  add(mxfp4("m", {2, 17, 96}, 16, 64));  // padded rows and columns
  w.add_file("config.json", R"({"model_type":"test"})");
  auto r = w.write(d / "x.iris", {});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (written) *written = data;
  return d / "x.iris";
}

// The writer's part hooks (FORMAT.md section 9): a reserved manifest room moves the data
// section to the page after it, a kept run of tensors is all that is written, a part record
// makes the file version 2.1, and a stored file is written as given.
TEST(Archive, PartHooksReserveRoomKeepTensorsAndStoreFilesAsGiven) {
  TempDir d;
  IrisWriter w;
  for (int i = 0; i < 4; ++i) {
    const TensorDesc desc = raw("t" + std::to_string(i), {2, 8});
    w.add_tensor(desc, json::object(), {bytes_producer(random_bytes(32, uint32_t(i)))});
  }
  auto room = w.manifest_reservation();
  ASSERT_TRUE(room.is_ok());
  EXPECT_GT(*room, 300u);  // four tensor entries
  w.keep_tensors(1, 3);
  w.reserve_manifest(10000);
  w.set_part({{"index", 1}});
  const std::string stored = "not compressed by this writer";
  w.add_stored_file({"notes.txt", "raw", 999, stored.size(), stored.size(), xxh3_64(stored.data(), stored.size())}, stored);
  ASSERT_TRUE(w.write(d / "p.iris", {}).is_ok());
  auto a = IrisArchive::open(d / "p.iris");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->preamble().data_offset, 12288u);  // round_up(64 + 10000, 4096)
  EXPECT_EQ(a->preamble().version_minor, 1);
  ASSERT_EQ(a->manifest().tensors.size(), 2u);
  EXPECT_EQ(a->manifest().tensors[0].desc.name, "t1");
  EXPECT_EQ(a->manifest().tensors[1].desc.name, "t2");
  EXPECT_EQ(a->manifest().part, json({{"index", 1}}));
  auto f = a->read_file("notes.txt");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(*f, stored);
  // Without a part record: version 2.0, the data section right after the manifest.
  IrisWriter plain;
  plain.add_tensor(raw("t", {2, 8}), json::object(), {bytes_producer(random_bytes(32, 1))});
  ASSERT_TRUE(plain.write(d / "w.iris", {}).is_ok());
  auto b = IrisArchive::open(d / "w.iris");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->preamble().version_minor, 0);
  EXPECT_EQ(b->preamble().data_offset, 4096u);
}

TEST(Archive, WriteThenReadGivesBackEveryByteAndChecksum) {
  TempDir d;
  std::map<std::string, std::vector<uint8_t>> data;
  const std::string path = write_sample(d, &data);
  auto a = IrisArchive::open(path);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->manifest().model_type, "test");
  ASSERT_EQ(a->manifest().tensors.size(), 4u);
  for (const auto& t : a->manifest().tensors)
    for (const auto& c : t.components) {
      auto b = a->bytes(c);
      const auto& want = data[t.desc.name + "/" + role_name(c.spec.role)];
      EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), want) << t.desc.name << "/" << role_name(c.spec.role);
      EXPECT_EQ(c.xxh3, xxh3_64(want.data(), want.size()));
      EXPECT_EQ(a->absolute_offset(c) % 4096, 0u);
    }
  auto cfg = a->read_file("config.json");
  ASSERT_TRUE(cfg.is_ok());
  EXPECT_EQ(*cfg, R"({"model_type":"test"})");
}

TEST(Archive, WritingTwiceGivesTheSameBytes) {
  TempDir d1, d2;
  EXPECT_EQ(read_all(write_sample(d1)), read_all(write_sample(d2)));
}

// The writer plans the data offset from manifest_text_size(), computed one tensor at a time:
// it must be the size of the whole document's text, with no tensor, one, and several.
TEST(Manifest, TextSizeIsTheSizeOfTheWholeDocument) {
  Manifest m;
  m.model_type = "llama";
  m.tool = {{"name", "iris"}};
  m.provenance = {{"source", {{"kind", "folder"}}}, {"options", {{"rules", json::array()}}}};
  m.files.push_back({"config.json", "zstd", 4096, 10, 20, 0x1234});
  EXPECT_EQ(manifest_text_size(m), manifest_to_json(m).dump(1).size());
  for (int i = 0; i < 3; ++i) {
    ArchiveTensor t;
    t.desc.name = "layers." + std::to_string(i) + ".w\u00e9ight";
    t.desc.shape = {2, uint64_t(3 + i)};
    t.desc.dtype = DType::kBF16;
    t.components.push_back({{Role::kData, DType::kBF16, t.desc.shape, 12}, uint64_t(i) * 4096, 7});
    t.source = json{{"tensors", json::array({{{"role", "data"}, {"name", t.desc.name}, {"shape", t.desc.shape}}})}};
    m.tensors.push_back(t);
    EXPECT_EQ(manifest_text_size(m), manifest_to_json(m).dump(1).size()) << i + 1 << " tensors";
  }
}

TEST(TileLayout, TileThenUntileIsTheIdentityAndPaddingIsTheZeroCode) {
  for (auto [bits, n, k, tn, tk] : std::vector<std::tuple<uint32_t, uint64_t, uint64_t, uint64_t, uint64_t>>{
           {4, 17, 96, 16, 64}, {4, 1, 32, 1, 32}, {8, 33, 40, 8, 16}, {8, 5, 300, 4, 128}, {4, 64, 256, 16, 256}}) {
    MatrixGeometry g;
    g.batch = 2;
    g.n = n;
    g.k = k;
    g.stored_k = bits == 4 ? (k + 31) / 32 * 32 : k;
    g.padded_n = (n + tn - 1) / tn * tn;
    g.padded_k = (k + tk - 1) / tk * tk;
    g.code_bits = bits;
    g.pad_byte = 0x77;
    auto rows = random_bytes(g.batch * n * g.row_bytes(), uint32_t(n * k));
    std::vector<uint8_t> tiled(g.batch * g.padded_n * g.padded_row_bytes(), 0xEE);
    const uint64_t sb = stripe_bytes(g, tn);
    for (uint64_t b = 0; b < g.batch; ++b)
      for (uint64_t r = 0; r < g.padded_n; r += tn)
        tile_stripe(g, tn, tk, r < n ? rows.data() + (b * n + r) * g.row_bytes() : nullptr, r,
                    tiled.data() + b * g.padded_n * g.padded_row_bytes() + r / tn * sb);
    // Every source byte sits where tiled_byte_offset says; everything else is padding.
    std::vector<bool> used(tiled.size());
    const uint64_t unit = bits == 4 ? 2 : 1;
    for (uint64_t b = 0; b < g.batch; ++b)
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < g.stored_k; c += unit) {
          uint64_t off = tiled_byte_offset(g, tn, tk, b, r, c);
          ASSERT_EQ(tiled[off], rows[(b * n + r) * g.row_bytes() + c * bits / 8]);
          used[off] = true;
        }
    for (size_t i = 0; i < tiled.size(); ++i)
      if (!used[i]) {
        ASSERT_EQ(tiled[i], 0x77) << "padding byte " << i;
      }
    std::vector<uint8_t> back(rows.size());
    for (uint64_t b = 0; b < g.batch; ++b)
      for (uint64_t r = 0; r < n; r += tn)
        untile_stripe(g, tn, tk, tiled.data() + b * g.padded_n * g.padded_row_bytes() + r / tn * sb, r,
                      back.data() + (b * n + r) * g.row_bytes());
    EXPECT_EQ(back, rows);
  }
}

// A manifest mutated one way must be refused with the given message.
struct BadManifest {
  std::string name;
  std::function<void(json&)> mutate;
  std::string expect;
};

class ManifestRejects : public ::testing::TestWithParam<BadManifest> {};

TEST_P(ManifestRejects, WithAClearMessage) {
  TempDir d;
  auto a = IrisArchive::open(write_sample(d));
  ASSERT_TRUE(a.is_ok());
  json j = manifest_to_json(a->manifest());
  GetParam().mutate(j);
  const std::string text = j.dump(1);
  auto m = manifest_from_json(j, a->preamble().data_size, "x.iris");
  ASSERT_FALSE(m.is_ok()) << GetParam().name;
  EXPECT_NE(m.status().message().find(GetParam().expect), std::string::npos) << m.status().message();
  // The archive reader's path (entries read as they are parsed) says exactly the same.
  ManifestReader reader(a->preamble().data_size, "x.iris");
  auto doc = parse_untrusted_json_streaming(text, "x.iris: manifest", "tensors", [&](json& t) { reader.add_tensor(t); });
  ASSERT_TRUE(doc.is_ok()) << doc.status().message();
  auto streamed = reader.finish(std::move(*doc));
  ASSERT_FALSE(streamed.is_ok()) << GetParam().name;
  EXPECT_EQ(streamed.status().message(), m.status().message());
  // So does the reader archives use, whose fast reader declines the text.
  TensorIndex index;
  const uint64_t data_size = a->preamble().data_size;
  EXPECT_FALSE(read_manifest_fast(text, data_size, kIrisVersionMajor, kIrisVersionMinor, "x.iris", &index).has_value());
  auto read = read_manifest(text, data_size, kIrisVersionMajor, kIrisVersionMinor, "x.iris", &index);
  ASSERT_FALSE(read.is_ok()) << GetParam().name;
  EXPECT_EQ(read.status().message(), m.status().message());
}

// Depth is checked while parsing, yet a text nested too deep anywhere is refused for its depth
// even when a syntax error comes first, as when a pass over the text preceded the parse.
TEST(UntrustedJson, DepthAndDuplicatesAreReportedAsBefore) {
  const auto message = [](const std::string& text) {
    auto j = parse_untrusted_json(text, "t");
    return j.is_ok() ? std::string("ok") : j.status().message();
  };
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  const std::string deepest_ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(message(deep), "t: JSON nested deeper than 64 levels");
  EXPECT_EQ(message(deepest_ok), "ok");
  EXPECT_EQ(message("[1,,]" + deep), "t: JSON nested deeper than 64 levels");
  EXPECT_EQ(message("[\"[[[[\"," + deepest_ok + "]").substr(0, 20), "t: JSON nested deepe");
  EXPECT_EQ(message("[\"" + deep + "\"]"), "ok");
  EXPECT_EQ(message(R"({"a": 1, "b": {"a": 2, "a": 3}, "b": 4})"), "t: duplicate key 'a'");
  EXPECT_EQ(message(R"({"a": 1, "b": 2, "a": 3, "b": 4})"), "t: duplicate key 'a'");
  EXPECT_EQ(message(R"({"a": 1, "a": 2,})").find("t: invalid JSON"), 0u);
  auto last_wins = parse_untrusted_json(R"({"a": 1, "a": [2]})", "t", false);
  ASSERT_TRUE(last_wins.is_ok());
  EXPECT_EQ(last_wins->dump(), R"({"a":[2]})");
}

// Errors before the tensors (document level) still come first when the tensors are read
// while parsing, and a parse error after a bad tensor is the one reported.
TEST(Manifest, StreamedReadingReportsInTheSameOrder) {
  const std::string bad_tensor = R"({"name": "a", "shape": "x"})";
  const auto read = [](const std::string& text) {
    ManifestReader reader(1 << 20, "x.iris");
    auto doc = parse_untrusted_json_streaming(text, "x.iris: manifest", "tensors", [&](json& t) { reader.add_tensor(t); });
    if (!doc.is_ok()) return doc.status().message();
    auto m = reader.finish(std::move(*doc));
    return m.is_ok() ? std::string("ok") : m.status().message();
  };
  EXPECT_EQ(read(R"({"tensors": [)" + bad_tensor + R"(], "format": "gguf", "alignment": 4096})"),
            "x.iris: manifest: 'format' is not \"iris\"");
  EXPECT_EQ(read(R"({"format": "iris", "alignment": 4096, "tensors": [)" + bad_tensor + R"(]})"),
            "x.iris: tensor 'a': 'shape' missing or not a list of at most 16 dims");
  EXPECT_EQ(read(R"({"format": "iris", "alignment": 4096, "tensors": [)" + bad_tensor + R"(], "x": })").find("invalid JSON"), 18u);
  EXPECT_EQ(read(R"({"format": "iris", "alignment": 4096, "tensors": [)" + bad_tensor + R"(], "format": "iris"})"),
            "x.iris: manifest: duplicate key 'format'");
  EXPECT_EQ(read(R"({"format": "iris", "alignment": 4096, "tensors": [7]})"), "x.iris: manifest: a tensor entry is not an object");
  EXPECT_EQ(read(R"({"format": "iris", "alignment": 4096, "tensors": []})"), "ok");
  EXPECT_EQ(read(R"([{"tensors": 1}, []])"), "x.iris: manifest: not a JSON object");
}

json& tensor(json& j, const std::string& name) {
  for (auto& t : j["tensors"])
    if (t["name"] == name) return t;
  throw std::runtime_error("no tensor " + name);
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, ManifestRejects,
    ::testing::Values(
        BadManifest{"misaligned", [](json& j) { tensor(j, "a")["components"][0]["offset"] = 4097; }, "is not 4096-aligned"},
        BadManifest{"overlap", [](json& j) { tensor(j, "m")["components"][0]["offset"] = tensor(j, "a")["components"][0]["offset"]; }, "x.iris: m/codes overlaps a/data"},
        BadManifest{"past end", [](json& j) { tensor(j, "a")["components"][0]["offset"] = uint64_t(1) << 40; }, "run past the"},
        BadManifest{"component count", [](json& j) { tensor(j, "m")["components"].erase(1); }, "1 components listed, its descriptor needs 2"},
        BadManifest{"component shape", [](json& j) { tensor(j, "a")["components"][0]["shape"] = {5, 3}; }, "but the descriptor needs"},
        BadManifest{"component dtype", [](json& j) { tensor(j, "a")["components"][0]["dtype"] = "f16"; }, "but the descriptor needs"},
        BadManifest{"unknown format", [](json& j) { tensor(j, "m")["format"] = "q4_k"; }, "unknown format 'q4_k'"},
        BadManifest{"tile_k not a block multiple", [](json& j) { tensor(j, "m")["layout"]["tile_k"] = 48; }, "tile_k 48 is not a multiple of 32"},
        BadManifest{"padding disagrees", [](json& j) { tensor(j, "m")["layout"]["padded_n"] = 17; }, "disagrees with shape and tile"},
        BadManifest{"duplicate name", [](json& j) { tensor(j, "empty")["name"] = "a"; }, "name appears twice"},
        BadManifest{"bad checksum text", [](json& j) { tensor(j, "a")["components"][0]["xxh3"] = "xyz"; }, "16 lowercase hex digits"},
        BadManifest{"bad dim", [](json& j) { tensor(j, "a")["shape"] = {-3, 5}; }, "not a dimension"},
        BadManifest{"wrong alignment", [](json& j) { j["alignment"] = 64; }, "alignment must be 4096"}),
    [](const ::testing::TestParamInfo<BadManifest>& i) {
      std::string n;
      for (char c : i.param.name) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

TEST(Preamble, RejectsCorruptionAndBadBounds) {
  TempDir d;
  const std::string good = read_all(write_sample(d));
  auto try_open = [&](std::string bytes) {
    write_bytes(d / "bad.iris", bytes);
    return IrisArchive::open(d / "bad.iris").status();
  };
  std::string s = good;
  s[0] = 'J';
  EXPECT_NE(try_open(s).message().find("bad magic"), std::string::npos);
  s = good;
  s[7] = '3';  // a damaged generation byte: the preamble checksum no longer matches
  EXPECT_EQ(try_open(s).kind(), ErrorKind::kInvalidInput);
  uint64_t h = XXH3_64bits(s.data(), 56);  // a later generation, written as such
  std::memcpy(&s[56], &h, 8);
  EXPECT_EQ(try_open(s).kind(), ErrorKind::kUnsupported);
  s = good;
  s[20] ^= 1;  // inside the manifest offset field: the preamble checksum catches it
  EXPECT_NE(try_open(s).message().find("preamble checksum mismatch"), std::string::npos);
  EXPECT_NE(try_open(good.substr(0, good.size() - 1)).message().find("does not end at the end"), std::string::npos);
  EXPECT_NE(try_open(good + "x").message().find("does not end at the end"), std::string::npos);
  EXPECT_NE(try_open(good.substr(0, 10)).message().find("too short"), std::string::npos);
  s = good;
  s[100] ^= 0x20;  // inside the manifest
  EXPECT_NE(try_open(s).message().find("manifest checksum mismatch"), std::string::npos);
  EXPECT_TRUE(try_open(good).is_ok());
}

}  // namespace
}  // namespace iris

namespace iris {
namespace {

// A scale_shape whose product passes 2^64 says so (it was reported as "holds 0 scales").
TEST(TensorDesc, AnOverflowingFp8ScaleShapeIsNamedAsSuch) {
  TensorDesc d;
  d.name = "w";
  d.shape = {64, 64};
  d.dtype = DType::kBF16;
  d.format = Format::kFp8E4M3;
  d.layout = {LayoutKind::kTiled, 16, 64};
  d.params = {{"scale_granularity", "tensor"}, {"scale_dtype", "f32"}, {"scale_shape", {uint64_t(1) << 40, uint64_t(1) << 40}},
              {"scale_name", "weight_scale"}};
  auto specs = component_specs(d);
  ASSERT_FALSE(specs.is_ok());
  EXPECT_NE(specs.status().message().find("overflows"), std::string::npos) << specs.status().message();
  EXPECT_EQ(specs.status().message().find("holds 0 scales"), std::string::npos) << specs.status().message();
}

}  // namespace
}  // namespace iris
