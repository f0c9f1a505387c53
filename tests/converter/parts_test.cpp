// Conversion as parts (`iris convert --part I/N`) merged by `iris merge`: the merged archive is
// the single-process archive byte for byte, for every fixture and target format and any part
// count (more parts than tensors included), parts given in any order; what is not one
// conversion's complete set of intact parts is refused in one line naming the file, and nothing
// is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "converter/pipeline/parts.h"
#include "tests/cli_runner.h"
#include "tests/sanitizer_scale.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

TEST(PartSpec, ParsesIOfNAndRefusesTheRest) {
  auto p = parse_part_spec("2/4");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->index, 2u);
  EXPECT_EQ(p->count, 4u);
  EXPECT_TRUE(parse_part_spec("1/1").is_ok());
  EXPECT_TRUE(parse_part_spec("65536/65536").is_ok());
  for (const char* bad : {"", "/", "1", "0/4", "5/4", "1/0", "-1/4", "1/-4", "1/4/5", " 1/4", "1/4 ", "a/4", "1/65537", "1.0/4", "01234567/99999999"})
    EXPECT_FALSE(parse_part_spec(bad).is_ok()) << bad;
}

// The ranges of all parts, checked against what the header promises (not against a second
// computation of them): contiguous, in order, every tensor once, and no part heavier than its
// share plus one tensor.
TEST(PartRange, PartsAreContiguousCoverEveryTensorOnceAndBalanceBytes) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = trial % 50;
    std::vector<uint64_t> bytes(n);
    const int shape = trial % 4;
    for (auto& b : bytes)
      b = shape == 0 ? 0 : shape == 1 ? rng() % 1000 : shape == 2 ? (rng() % 10 == 0 ? uint64_t(1) << 40 : rng() % 4096) : 4096;
    for (uint32_t count : {1u, 2u, 3u, 7u, 64u}) {
      uint64_t total = 0, largest = 0;
      for (auto b : bytes) total += b, largest = std::max(largest, b);
      size_t next = 0;
      for (uint32_t i = 1; i <= count; ++i) {
        const auto [first, end] = part_range(bytes, {i, count});
        ASSERT_EQ(first, next) << "trial " << trial << " part " << i << "/" << count;
        ASSERT_LE(first, end);
        next = end;
        uint64_t mine = 0;
        for (size_t t = first; t < end; ++t) mine += bytes[t];
        if (total) EXPECT_LE(mine, total / count + largest + 1) << "trial " << trial << " part " << i << "/" << count;
        else EXPECT_LE(end - first, n / count + 1);
      }
      EXPECT_EQ(next, n) << "trial " << trial << " count " << count;
    }
  }
}

// The part record as merge reads it from a file: every field's type and range, hostile values
// included, refused naming the file; a good record read back as written.
TEST(PartRecord, ReadsWhatItWritesAndRefusesHostileFields) {
  PartRecord r;
  r.spec = {2, 4};
  r.plan = 0x0123456789abcdefull;
  r.first_tensor = 10;
  r.tensors = 5;
  r.total_tensors = 20;
  r.manifest_reserve = 12345;
  auto back = PartRecord::from_json(r.to_json(), "f.iris");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->spec.index, 2u);
  EXPECT_EQ(back->spec.count, 4u);
  EXPECT_EQ(back->plan, r.plan);
  EXPECT_EQ(back->first_tensor, 10u);
  EXPECT_EQ(back->tensors, 5u);
  EXPECT_EQ(back->total_tensors, 20u);
  EXPECT_EQ(back->manifest_reserve, 12345u);
  const nlohmann::json good = r.to_json();
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"index", 0},          {"index", 5},           {"index", -1},          {"index", 2.5},          {"index", "2"},
      {"count", 0},          {"count", 65537},       {"count", nullptr},     {"plan", "0123"},        {"plan", "xyz3456789abcdef"},
      {"plan", 7},           {"first_tensor", 21},   {"tensors", 11},        {"tensors", -5},         {"total_tensors", 3},
      {"manifest_reserve", "big"}, {"first_tensor", 18446744073709551615ull}};
  for (const auto& [key, value] : bad) {
    nlohmann::json j = good;
    j[key] = value;
    auto got = PartRecord::from_json(j, "f.iris");
    EXPECT_FALSE(got.is_ok()) << key << " = " << value.dump();
    if (!got.is_ok()) EXPECT_NE(got.status().message().find("f.iris"), std::string::npos) << got.status().message();
  }
  for (const char* key : {"index", "count", "plan", "first_tensor", "tensors", "total_tensors", "manifest_reserve"}) {
    nlohmann::json j = good;
    j.erase(key);
    EXPECT_FALSE(PartRecord::from_json(j, "f.iris").is_ok()) << "without " << key;
  }
  EXPECT_FALSE(PartRecord::from_json(nlohmann::json(), "f.iris").is_ok());
  EXPECT_FALSE(PartRecord::from_json(nlohmann::json::array(), "f.iris").is_ok());
}

std::string parts_of(const TempDir& d, const std::string& source, const std::string& options, uint32_t count, const std::string& tag) {
  std::string list;
  for (uint32_t i = 1; i <= count; ++i) {
    const std::string out = d / (tag + "-part" + std::to_string(i) + ".iris");
    const auto r = run("convert " + source + " -o " + out + " -q --part " + std::to_string(i) + "/" + std::to_string(count) + " " + options);
    EXPECT_EQ(r.rc, 0) << r.out;
    list = out + " " + list;  // the last part first: merge takes them in any order
  }
  return list;
}

TEST(Merge, MergedPartsAreTheSingleProcessArchiveByteForByte) {
  const std::pair<std::string, std::string> cases[] = {
      {"llama-bf16", "--quant nf4"},  {"llama-bf16", "--quant mxfp4"}, {"llama-bf16", "--quant fp8-block"},
      {"llama-bf16", "--quant fp8"},  {"gptoss-mxfp4", ""},            {"gptoss-mxfp4", "--quant nf4"},
      {"llama-nf4-dq", ""},           {"llama-fp8-block", ""},         {"llama-fp8-block", "--quant mxfp4 --tile-k 128"}};
  for (size_t c = 0; c < std::size(cases); ++c) {
    const auto& [fixture, options] = cases[c];
    TempDir d;
    ASSERT_EQ(run("convert " + kFix + fixture + " -o " + (d / "whole.iris") + " -q " + options).rc, 0);
    const std::string whole = read_all(d / "whole.iris");
    // 40: more parts than tensors, some empty; once a fixture (part_range's empty parts are
    // PartRange's subject, and 40 runs a case were most of this test's time under the sanitizer).
    // Under the sanitizer every other count (tests/sanitizer_scale.h): 1 and 3, and 40 as above.
    const uint32_t every[] = {1u, 2u, 3u, 5u};
    std::vector<uint32_t> counts = iris::test_scale::inputs(every);
    if (c == 0 || cases[c - 1].first != fixture) counts.push_back(40u);
    for (uint32_t count : counts) {
      SCOPED_TRACE(fixture + " " + options + " in " + std::to_string(count) + " parts");
      const std::string list = parts_of(d, kFix + fixture, options, count, "n" + std::to_string(count));
      const auto r = run("merge " + list + "-o " + (d / "merged.iris") + " -q --force");
      ASSERT_EQ(r.rc, 0) << r.out;
      EXPECT_TRUE(read_all(d / "merged.iris") == whole);
    }
  }
}

TEST(Merge, APartIsAValidArchiveOfItsTensorsMarkedAsAPart) {
  TempDir d;
  parts_of(d, kFix + "llama-bf16", "--quant nf4", 2, "p");
  const auto j = nlohmann::json::parse(run("inspect " + (d / "p-part2.iris") + " --json").out);
  EXPECT_EQ(j["format_version"], "2.1");
  const auto v = run("verify " + (d / "p-part2.iris") + " -q");
  EXPECT_EQ(v.rc, 0) << v.out;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "whole.iris") + " -q --quant nf4").rc, 0);
  const auto w = nlohmann::json::parse(run("inspect " + (d / "whole.iris") + " --json").out);
  EXPECT_EQ(w["format_version"], "2.0");  // a whole archive is what it always was
  // The recorded manifest room puts the data section where the single-process writer put it.
  const std::string whole = read_all(d / "whole.iris");
  uint64_t data_offset = 0;
  std::memcpy(&data_offset, whole.data() + 32, 8);
  for (const char* name : {"p-part1.iris", "p-part2.iris"}) {
    const std::string part = read_all(d / name);
    uint64_t manifest_size = 0;
    std::memcpy(&manifest_size, part.data() + 24, 8);
    const auto m = nlohmann::json::parse(part.substr(64, manifest_size));
    const uint64_t reserve = m["part"]["manifest_reserve"].get<uint64_t>();
    EXPECT_EQ((64 + reserve + 4095) / 4096 * 4096, data_offset) << name;
    EXPECT_EQ(m["part"]["total_tensors"].get<uint64_t>(), w["tensors"].size()) << name;
  }
}

// Each refusal: exit 2 or 3, one line naming the file (or the missing part), no output.
void expect_refused(const TempDir& d, const std::string& args, const std::string& named) {
  const auto r = run("merge " + args + " -o " + (d / "out.iris"));
  EXPECT_TRUE(r.rc == 2 || r.rc == 3) << r.rc << ": " << r.out;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_FALSE(fs::exists(d / "out.iris")) << args;
  for (const auto& e : fs::directory_iterator(d.path)) EXPECT_EQ(e.path().string().find(".partial-"), std::string::npos) << e.path();
}

TEST(Merge, RefusesWhatIsNotOneConversionsIntactParts) {
  TempDir d;
  const std::string src = kFix + "llama-bf16";
  parts_of(d, src, "--quant nf4", 3, "a");
  const auto p = [&](const std::string& name) { return d / name; };
  expect_refused(d, p("a-part1.iris") + " " + p("a-part3.iris"), "part 2/3 missing");
  expect_refused(d, p("a-part1.iris") + " " + p("a-part2.iris") + " " + p("a-part2.iris") + " " + p("a-part3.iris"), "are both part 2/3");
  fs::copy_file(p("a-part2.iris"), p("again.iris"));  // a part run twice
  expect_refused(d, p("a-part1.iris") + " " + p("a-part2.iris") + " " + p("again.iris") + " " + p("a-part3.iris"), "again.iris");
  // Other options (mxfp4), another source (one byte of a tensor changed), a whole archive.
  ASSERT_EQ(run("convert " + src + " -o " + p("mx2.iris") + " -q --quant mxfp4 --part 2/3").rc, 0);
  expect_refused(d, p("a-part1.iris") + " " + p("mx2.iris") + " " + p("a-part3.iris"), "mx2.iris");
  fs::copy(src, p("changed"));
  const std::string shard = p("changed") + "/model-00004-of-00004.safetensors";
  std::string bytes = read_all(shard);
  bytes[bytes.size() - 3] ^= 0x01;
  write_bytes(shard, bytes);
  ASSERT_EQ(run("convert " + p("changed") + " -o " + p("other2.iris") + " -q --quant nf4 --part 2/3").rc, 0);
  expect_refused(d, p("a-part1.iris") + " " + p("other2.iris") + " " + p("a-part3.iris"), "other2.iris");
  ASSERT_EQ(run("convert " + src + " -o " + p("whole.iris") + " -q --quant nf4").rc, 0);
  expect_refused(d, p("whole.iris"), "whole.iris: not a conversion part");
  // A part of another count.
  ASSERT_EQ(run("convert " + src + " -o " + p("of4.iris") + " -q --quant nf4 --part 3/4").rc, 0);
  expect_refused(d, p("a-part1.iris") + " " + p("a-part2.iris") + " " + p("of4.iris"), "of4.iris");
  // A flipped byte inside a tensor of a part: found while copying; nothing written.
  std::string part = read_all(p("a-part2.iris"));
  const auto j = nlohmann::json::parse(run("inspect " + p("a-part2.iris") + " --json").out);
  const auto& c = j["tensors"][0]["components"][0];
  uint64_t data_offset = 0;
  std::memcpy(&data_offset, part.data() + 32, 8);
  part[data_offset + c["offset"].get<uint64_t>() + c["bytes"].get<uint64_t>() / 2] ^= 0x10;
  write_bytes(p("bad2.iris"), part);
  expect_refused(d, p("a-part1.iris") + " " + p("bad2.iris") + " " + p("a-part3.iris"), "bad2.iris");
  // The output may not be a part, and an existing output needs --force.
  const auto same = run("merge " + p("a-part1.iris") + " " + p("a-part2.iris") + " " + p("a-part3.iris") + " -o " + p("a-part1.iris") + " --force");
  EXPECT_EQ(same.rc, 2) << same.out;
  write_bytes(p("exists.iris"), "mine");
  const auto exists = run("merge " + p("a-part1.iris") + " " + p("a-part2.iris") + " " + p("a-part3.iris") + " -o " + p("exists.iris"));
  EXPECT_EQ(exists.rc, 2) << exists.out;
  EXPECT_EQ(read_all(p("exists.iris")), "mine");
}

TEST(Merge, PartOptionErrorsAreUsageErrors) {
  TempDir d;
  for (const std::string spec : {"0/3", "4/3", "x", "1/0"}) {
    const auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "x.iris") + " --part " + spec);
    EXPECT_EQ(r.rc, 2) << spec << ": " << r.out;
    EXPECT_NE(r.out.find("--part"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d / "x.iris"));
  }
  const auto r = run("convert " + kFix + "llama-bf16 -o " + (d / "x.iris") + " --part 1/2 --dry-run");
  EXPECT_EQ(r.rc, 2) << r.out;
}

}  // namespace
}  // namespace iris
