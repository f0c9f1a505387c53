// Hostile archives through the C API: a catalogue of malformed files (each refused with an
// error status and one line naming the file), damaged data (caught by verify), and random
// byte flips and truncations, after which every call still returns a status.
#include <sys/stat.h>
#include <xxhash.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "iris/iris.h"
#include "tests/api/capi_fixture.h"

namespace iris::capi_test {
namespace {

using nlohmann::json;
using testing_files::read_all;
using testing_files::TempDir;
using testing_files::write_bytes;

template <typename T>
T get(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <typename T>
void put(std::string& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

// The archive's manifest, and a rebuilt archive around an edited one: the data section moves
// to the next 4096-byte boundary and both checksums are recomputed (FORMAT.md section 2), so
// the edit reaches the manifest validation instead of stopping at a checksum.
json manifest_of(const std::string& b) { return json::parse(b.substr(get<uint64_t>(b, 16), get<uint64_t>(b, 24))); }

std::string with_manifest(const std::string& b, const std::string& text) {
  const uint64_t data_offset = get<uint64_t>(b, 32), data_size = get<uint64_t>(b, 40);
  const uint64_t new_data = (64 + text.size() + 4095) / 4096 * 4096;
  std::string out(new_data, '\0');
  std::memcpy(out.data(), b.data(), 64);
  std::memcpy(out.data() + 64, text.data(), text.size());
  out += b.substr(data_offset, data_size);
  put<uint64_t>(out, 24, text.size());
  put<uint64_t>(out, 32, new_data);
  put<uint64_t>(out, 48, XXH3_64bits(text.data(), text.size()));
  put<uint64_t>(out, 56, XXH3_64bits(out.data(), 56));
  return out;
}

struct Hostile {
  std::string name;
  std::function<std::string(const std::string&)> make;
};

// Index of the first tensor of `format` in the manifest.
size_t first(const json& m, const std::string& format) {
  for (size_t i = 0; i < m["tensors"].size(); ++i)
    if (m["tensors"][i]["format"] == format) return i;
  ADD_FAILURE() << "no " << format << " tensor";
  return 0;
}

std::vector<Hostile> catalogue() {
  auto edit = [](std::function<void(json&)> f) {
    return [f](const std::string& b) {
      json m = manifest_of(b);
      f(m);
      return with_manifest(b, m.dump());
    };
  };
  auto mx = [](json& m) -> json& { return m["tensors"][first(m, "mxfp4")]; };
  std::vector<Hostile> c = {
      {"empty file", [](const std::string&) { return std::string(); }},
      {"ten bytes", [](const std::string& b) { return b.substr(0, 10); }},
      {"truncated by one byte", [](const std::string& b) { return b.substr(0, b.size() - 1); }},
      {"truncated inside the manifest", [](const std::string& b) { return b.substr(0, 100); }},
      {"bad magic", [](const std::string& b) { std::string x = b; x[0] = 'X'; return x; }},
      {"preamble checksum", [](const std::string& b) { std::string x = b; x[57] ^= 1; return x; }},
      {"manifest byte flipped", [](const std::string& b) { std::string x = b; x[80] ^= 4; return x; }},
      {"manifest size past the file", [](const std::string& b) {
         std::string x = b;
         put<uint64_t>(x, 24, uint64_t(1) << 40);
         put<uint64_t>(x, 56, XXH3_64bits(x.data(), 56));
         return x;
       }},
      {"data size disagrees with the file", [](const std::string& b) {
         std::string x = b;
         put<uint64_t>(x, 40, get<uint64_t>(b, 40) + 4096);
         put<uint64_t>(x, 56, XXH3_64bits(x.data(), 56));
         return x;
       }},
      {"manifest is not JSON", [](const std::string& b) { return with_manifest(b, "{\"format\": \"iris\", "); }},
      {"manifest is a list", [](const std::string& b) { return with_manifest(b, "[1, 2, 3]"); }},
      {"manifest nested 1000 deep", [](const std::string& b) { return with_manifest(b, std::string(1000, '[') + std::string(1000, ']')); }},
      {"manifest not UTF-8", [](const std::string& b) { return with_manifest(b, "{\"format\": \"ir\xff\xfeis\"}"); }},
      {"format is not iris", edit([](json& m) { m["format"] = "gguf"; })},
      {"alignment 512", edit([](json& m) { m["alignment"] = 512; })},
      {"tensors is an object", edit([](json& m) { m["tensors"] = json::object(); })},
      {"tensor without a name", edit([&](json& m) { mx(m).erase("name"); })},
      {"tensor name twice", edit([](json& m) { m["tensors"][1]["name"] = m["tensors"][0]["name"]; })},
      {"unknown dtype", edit([&](json& m) { mx(m)["dtype"] = "q4_k"; })},
      {"unknown format", edit([&](json& m) { mx(m)["format"] = "q4_0"; })},
      {"quantized without params", edit([&](json& m) { mx(m).erase("params"); })},
      {"unknown parameter", edit([&](json& m) { mx(m)["params"]["swizzle"] = 1; })},
      {"missing parameter", edit([&](json& m) { mx(m)["params"].erase("block_size"); })},
      {"wrong fixed parameter", edit([&](json& m) { mx(m)["params"]["nibble_order"] = "high_first"; })},
      {"parameter of the wrong type", edit([&](json& m) { mx(m)["params"]["block_size"] = "32"; })},
      {"mxfp4 block size 64", edit([&](json& m) { mx(m)["params"]["block_size"] = 64; })},
      {"dimension 2^60", edit([&](json& m) { mx(m)["shape"][0] = uint64_t(1) << 60; })},
      {"17 dimensions", edit([&](json& m) { mx(m)["shape"] = std::vector<uint64_t>(17, 1); })},
      {"element count overflows", edit([&](json& m) { mx(m)["shape"] = std::vector<uint64_t>(8, uint64_t(1) << 40); })},
      {"negative dimension", edit([&](json& m) { mx(m)["shape"][0] = -4; })},
      {"fractional dimension", edit([&](json& m) { mx(m)["shape"][0] = 1.5; })},
      {"shape is a string", edit([&](json& m) { mx(m)["shape"] = "4x256x256"; })},
      {"unknown layout", edit([&](json& m) { mx(m)["layout"]["kind"] = "swizzled"; })},
      {"tile_n 0", edit([&](json& m) { mx(m)["layout"]["tile_n"] = 0; })},
      {"tile_k not a multiple of the block", edit([&](json& m) { mx(m)["layout"]["tile_k"] = 48; })},
      {"padding disagrees with the tile", edit([&](json& m) { mx(m)["layout"]["padded_n"] = 4096; })},
      {"a component missing", edit([&](json& m) { mx(m)["components"].erase(1); })},
      {"components swapped", edit([&](json& m) { std::swap(mx(m)["components"][0], mx(m)["components"][1]); })},
      {"component bytes wrong", edit([&](json& m) { mx(m)["components"][0]["bytes"] = 12; })},
      {"offset not aligned", edit([&](json& m) { mx(m)["components"][0]["offset"] = mx(m)["components"][0]["offset"].get<uint64_t>() + 1; })},
      {"offset past the data", edit([&](json& m) { mx(m)["components"][0]["offset"] = uint64_t(1) << 50; })},
      {"offset near 2^64", edit([&](json& m) { mx(m)["components"][0]["offset"] = ~uint64_t(4095); })},
      {"components overlap", edit([&](json& m) { mx(m)["components"][1]["offset"] = mx(m)["components"][0]["offset"]; })},
      {"tensors overlap", edit([&](json& m) { m["tensors"][1]["components"][0]["offset"] = m["tensors"][0]["components"][0]["offset"]; })},
      {"checksum not hex", edit([&](json& m) { mx(m)["components"][0]["xxh3"] = "zzzzzzzzzzzzzzzz"; })},
      {"embedded file encoding unknown", edit([](json& m) { m["files"][0]["encoding"] = "lz4"; })},
      // The provenance record export rebuilds tensors from: every reader checks its schema.
      {"source not an object", edit([&](json& m) { mx(m)["source"] = json::array({1}); })},
      {"source tensors not a list", edit([&](json& m) { mx(m)["source"]["tensors"] = 3; })},
      {"source part shape a string", edit([&](json& m) { mx(m)["source"]["tensors"][0]["shape"] = "big"; })},
      {"source part role unknown", edit([&](json& m) { mx(m)["source"]["tensors"][0]["role"] = "weights"; })},
      {"embedded file past the data", edit([](json& m) { m["files"][0]["offset"] = uint64_t(1) << 50; })},
      // One schema for every reader (issue 24 item 12): names hold no NUL (the C API hands them
      // out as C strings) and are UTF-8; embedded files have plain names; the two version
      // fields agree; model_type is a string.
      {"tensor name holds a NUL", edit([&](json& m) { mx(m)["name"] = std::string("x\0a", 3); })},
      {"tensor name a lone surrogate", [](const std::string& b) {
         std::string text = manifest_of(b).dump();
         const size_t at = text.find("\"name\":\"") + 8;
         return with_manifest(b, text.insert(at, "\\ud800"));
       }},
      {"embedded file name holds a NUL", edit([](json& m) { m["files"][0]["name"] = std::string("a\0b", 3); })},
      {"embedded file name ../x", edit([](json& m) { m["files"][0]["name"] = "../x"; })},
      {"embedded file name /abs", edit([](json& m) { m["files"][0]["name"] = "/abs"; })},
      {"embedded file name sub/dir", edit([](json& m) { m["files"][0]["name"] = "sub/dir"; })},
      {"embedded file name ..", edit([](json& m) { m["files"][0]["name"] = ".."; })},
      {"embedded file name empty", edit([](json& m) { m["files"][0]["name"] = ""; })},
      {"format_version 2.1 under a 2.0 preamble", edit([](json& m) { m["format_version"] = {2, 1}; })},
      {"format_version missing", edit([](json& m) { m.erase("format_version"); })},
      {"model_type a number", edit([](json& m) { m["model_type"] = 7; })},
      {"embedded file raw size huge", edit([](json& m) { m["files"][0]["raw_bytes"] = uint64_t(1) << 62; })},
  };
  return c;
}

std::vector<Hostile> nf4_fp8_catalogue() {
  auto edit = [](const std::string& format, std::function<void(json&)> f) {
    return [format, f](const std::string& b) {
      json m = manifest_of(b);
      f(m["tensors"][first(m, format)]);
      return with_manifest(b, m.dump());
    };
  };
  return {
      {"nf4 block size 48", edit("nf4", [](json& t) { t["params"]["block_size"] = 48; })},
      {"nf4 block size 0", edit("nf4", [](json& t) { t["params"]["block_size"] = 0; })},
      {"nf4 nested block size 0", edit("nf4", [](json& t) { t["params"]["nested_block_size"] = 0; })},
      {"nf4 nested offset bits disagree", edit("nf4", [](json& t) { t["params"]["nested_offset_f32_bits"] = "0x00000001"; })},
      {"nf4 nested offset missing", edit("nf4", [](json& t) { t["params"].erase("nested_offset"); })},
      {"nf4 nested offset 1e308", edit("nf4", [](json& t) { t["params"]["nested_offset"] = 1e308; t["params"].erase("nested_offset_f32_bits"); })},
      {"nf4 double_quant a string", edit("nf4", [](json& t) { t["params"]["double_quant"] = "yes"; })},
      {"nf4 quant_state huge", edit("nf4", [](json& t) { t["params"]["quant_state_bytes"] = uint64_t(1) << 40; })},
      {"fp8 block_n 0", edit("fp8_e4m3", [](json& t) { t["params"]["block_n"] = 0; })},
      {"fp8 block params on channel scales", edit("fp8_e4m3", [](json& t) { t["params"]["scale_granularity"] = "channel"; })},
      {"fp8 scale count wrong", edit("fp8_e4m3", [](json& t) { t["params"]["scale_shape"] = {1, 1}; })},
      {"fp8 scale dtype f64", edit("fp8_e4m3", [](json& t) { t["params"]["scale_dtype"] = "f64"; })},
      {"fp8 granularity unknown", edit("fp8_e4m3", [](json& t) { t["params"]["scale_granularity"] = "row"; })},
  };
}

void expect_refused(const std::string& path, const Hostile& h) {
  iris_status st;
  std::string msg;
  auto a = open_archive(path, &st, &msg);
  EXPECT_FALSE(a) << h.name << ": opened";
  EXPECT_TRUE(st == IRIS_ERR_INVALID_INPUT || st == IRIS_ERR_CORRUPT || st == IRIS_ERR_UNSUPPORTED || st == IRIS_ERR_IO)
      << h.name << ": " << iris_status_name(st) << " " << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << h.name << ": message does not name the file: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << h.name << ": not one line: " << msg;
}

TEST(CApiHostile, EveryMalformedArchiveIsRefusedWithOneLineNamingTheFile) {
  const std::string good = read_all(converted("gptoss-mxfp4"));
  TempDir d;
  {  // the unedited rebuild opens: the refusals below are the edits', not the rebuild's
    write_bytes(d / "rebuilt.iris", with_manifest(good, manifest_of(good).dump()));
    auto a = open_archive(d / "rebuilt.iris");
    ASSERT_TRUE(a);
    EXPECT_EQ(iris_archive_verify(a.get(), 0, nullptr, 0), IRIS_OK);
  }
  const auto cases = catalogue();
  EXPECT_GE(cases.size(), 45u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = d / ("hostile-" + std::to_string(i) + ".iris");
    write_bytes(path, cases[i].make(good));
    expect_refused(path, cases[i]);
  }
}

TEST(CApiHostile, MalformedNf4AndFp8ParametersAreRefused) {
  TempDir d;
  for (const char* fixture : {"llama-nf4-dq", "llama-fp8-block"}) {
    const std::string good = read_all(converted(fixture));
    {
      write_bytes(d / "rebuilt.iris", with_manifest(good, manifest_of(good).dump()));
      ASSERT_TRUE(open_archive(d / "rebuilt.iris"));
    }
    const json m = manifest_of(good);
    for (const auto& h : nf4_fp8_catalogue()) {
      const bool nf4 = h.name.rfind("nf4", 0) == 0;
      if (nf4 != (std::string(fixture) == "llama-nf4-dq")) continue;
      const std::string path = d / "hostile.iris";
      write_bytes(path, h.make(good));
      expect_refused(path, h);
    }
  }
}

// Not a regular file: a FIFO (no writer will ever come) and a folder are refused at once.
TEST(CApiHostile, FifoAndFolderAreRefusedWithoutWaiting) {
  TempDir d;
  const std::string fifo = d / "pipe.iris";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  iris_status st;
  std::string msg;
  EXPECT_FALSE(open_archive(fifo, &st, &msg));
  EXPECT_EQ(st, IRIS_ERR_INVALID_INPUT) << msg;
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  EXPECT_FALSE(open_archive(d.path.string(), &st, &msg));
  EXPECT_NE(st, IRIS_OK);
}

// Bytes damaged inside a component: the archive opens (its structure is intact), verify
// names the tensor and component, and dequantizing the damaged tensor still returns a status.
TEST(CApiHostile, DamagedDataIsCaughtByVerify) {
  std::string b = read_all(converted("llama-nf4-dq"));
  auto a0 = open_archive(converted("llama-nf4-dq"));
  ASSERT_TRUE(a0);
  uint64_t i = 0;
  ASSERT_EQ(iris_archive_find_tensor(a0.get(), "model.layers.1.mlp.up_proj.weight", &i, nullptr, 0), IRIS_OK);
  iris_component_info ci;
  ASSERT_EQ(iris_archive_find_component(a0.get(), i, IRIS_ROLE_ABSMAX, &ci, nullptr, 0), IRIS_OK);
  b[ci.file_offset + ci.size / 2] ^= 0x20;
  TempDir d;
  write_bytes(d / "damaged.iris", b);
  auto a = open_archive(d / "damaged.iris");
  ASSERT_TRUE(a);
  char msg[512];
  EXPECT_EQ(iris_tensor_verify(a.get(), i, msg, sizeof msg), IRIS_ERR_CORRUPT);
  EXPECT_NE(std::string(msg).find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(std::string(msg).find("absmax"), std::string::npos) << msg;
  EXPECT_EQ(iris_archive_verify(a.get(), 2, msg, sizeof msg), IRIS_ERR_CORRUPT);
  iris_status st;
  auto v = open_archive(d / "damaged.iris", &st, nullptr, IRIS_OPEN_VERIFY);
  EXPECT_FALSE(v);
  EXPECT_EQ(st, IRIS_ERR_CORRUPT);
  iris_tensor_info info;
  ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
  std::vector<float> out(info.numel);
  EXPECT_EQ(iris_dequantize(a.get(), i, IRIS_DTYPE_F32, out.data(), out.size() * 4, 0, nullptr, 0), IRIS_OK);
}

// Random damage: every call returns (a sanitizer build turns any bad read into a failure).
TEST(CApiHostile, RandomFlipsAndTruncationsNeverCrash) {
  TempDir d;
  std::mt19937 rng(20261123);
  for (const char* fixture : {"gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"}) {
    const std::string good = read_all(converted(fixture));
    const uint64_t manifest_end = 64 + get<uint64_t>(good, 24);
    int opened = 0;
    for (int trial = 0; trial < 150; ++trial) {
      std::string b = good;
      if (trial % 10 == 9) {
        b.resize(rng() % b.size());
      } else {
        // Mostly the preamble and manifest, where structure lives; some anywhere.
        const uint64_t at = trial % 3 ? rng() % manifest_end : rng() % b.size();
        b[at] = char(b[at] ^ (1 << (rng() % 8)));
      }
      const std::string path = d / "fuzz.iris";
      write_bytes(path, b);
      iris_status st;
      std::string msg;
      auto a = open_archive(path, &st, &msg);
      if (!a) {
        EXPECT_NE(st, IRIS_OK);
        EXPECT_FALSE(msg.empty());
        continue;
      }
      ++opened;
      iris_archive_verify(a.get(), 1, nullptr, 0);
      for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
        iris_tensor_info info;
        if (iris_archive_tensor_info(a.get(), i, &info, nullptr, 0) != IRIS_OK) continue;
        std::vector<uint16_t> out(info.numel);
        iris_dequantize(a.get(), i, IRIS_DTYPE_BF16, out.data(), out.size() * 2, 1, nullptr, 0);
      }
    }
    EXPECT_GT(opened, 0) << fixture;  // some damage lands in tensor data, which opens
  }
}

}  // namespace
}  // namespace iris::capi_test
