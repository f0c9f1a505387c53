// Archive sets (FORMAT.md section 10): the records that tie a set together read back as written
// and refuse hostile fields naming the file; the cut into members keeps every file within the
// limit and starts a new member only when the next tensor would not fit; the names follow the
// sharded-safetensors numbering.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "common/checked_math.h"
#include "formats/archive_set.h"
#include "formats/iris_preamble.h"

namespace iris {
namespace {

TEST(SetMemberRecord, ReadsWhatItWritesAndRefusesHostileFields) {
  SetMemberRecord r{0x0123456789abcdefull, 2, 4, 10, 5, 20};
  auto back = SetMemberRecord::from_json(r.to_json(), "m.iris");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->id, r.id);
  EXPECT_EQ(back->index, 2u);
  EXPECT_EQ(back->count, 4u);
  EXPECT_EQ(back->first_tensor, 10u);
  EXPECT_EQ(back->tensors, 5u);
  EXPECT_EQ(back->total_tensors, 20u);
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"index", 0},     {"index", 5},        {"index", -1},       {"count", 100000},   {"count", "4"},
      {"id", "0123"},   {"id", 7},           {"first_tensor", 21}, {"tensors", 11},    {"total_tensors", 3},
      {"tensors", 2.5}, {"first_tensor", 18446744073709551615ull}};
  for (const auto& [key, value] : bad) {
    nlohmann::json j = r.to_json();
    j[key] = value;
    auto got = SetMemberRecord::from_json(j, "m.iris");
    ASSERT_FALSE(got.is_ok()) << key << " = " << value.dump();
    EXPECT_NE(got.status().message().find("m.iris"), std::string::npos) << got.status().message();
  }
  for (const char* key : {"id", "index", "count", "first_tensor", "tensors", "total_tensors"}) {
    nlohmann::json j = r.to_json();
    j.erase(key);
    EXPECT_FALSE(SetMemberRecord::from_json(j, "m.iris").is_ok()) << "without " << key;
  }
  EXPECT_FALSE(SetMemberRecord::from_json(nlohmann::json(), "m.iris").is_ok());
}

SetRecord three_members() {
  SetRecord s;
  s.id = 42;
  s.tensors = 9;
  s.files = {{"m-00001-of-00003.iris", 5000, 1, 0, 4}, {"m-00002-of-00003.iris", 6000, 2, 4, 0}, {"m-00003-of-00003.iris", 7000, 3, 4, 5}};
  return s;
}

TEST(SetRecord, ReadsWhatItWritesAndRefusesHostileFields) {
  const SetRecord s = three_members();
  auto back = SetRecord::from_json(s.to_json(), "i.iris");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->files.size(), 3u);
  EXPECT_EQ(back->files[1].name, "m-00002-of-00003.iris");
  EXPECT_EQ(back->files[2].bytes, 7000u);
  EXPECT_EQ(back->files[2].manifest_xxh3, 3u);
  EXPECT_EQ(back->files[2].first_tensor, 4u);
  EXPECT_EQ(back->tensors, 9u);
  // Each edit makes the record wrong in one way.
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> bad = {
      {"a name leading out of the folder", [](auto& j) { j["files"][0]["name"] = "../m.iris"; }},
      {"a path", [](auto& j) { j["files"][0]["name"] = "sub/m.iris"; }},
      {"an empty name", [](auto& j) { j["files"][0]["name"] = ""; }},
      {"a name twice", [](auto& j) { j["files"][1]["name"] = j["files"][0]["name"]; }},
      {"runs that leave a gap", [](auto& j) { j["files"][2]["first_tensor"] = 5; }},
      {"runs that overlap", [](auto& j) { j["files"][1]["first_tensor"] = 3; }},
      {"too few tensors", [](auto& j) { j["tensors"] = 10; }},
      {"too many tensors", [](auto& j) { j["files"][2]["tensors"] = 6; }},
      {"a run past the set", [](auto& j) { j["files"][2]["tensors"] = 18446744073709551615ull; }},
      {"no members", [](auto& j) { j["files"] = nlohmann::json::array(); }},
      {"files not a list", [](auto& j) { j["files"] = 3; }},
      {"a bad checksum", [](auto& j) { j["files"][0]["manifest_xxh3"] = "zz"; }},
      {"a negative size", [](auto& j) { j["files"][0]["bytes"] = -1; }},
      {"a bad id", [](auto& j) { j["id"] = "12"; }},
      {"a member not an object", [](auto& j) { j["files"][0] = 1; }},
  };
  for (const auto& [what, edit] : bad) {
    nlohmann::json j = s.to_json();
    edit(j);
    auto got = SetRecord::from_json(j, "i.iris");
    ASSERT_FALSE(got.is_ok()) << what;
    EXPECT_NE(got.status().message().find("i.iris"), std::string::npos) << got.status().message();
  }
}

TEST(SetMemberName, FollowsTheShardedSafetensorsNumbering) {
  EXPECT_EQ(set_member_name("/x/model.iris", 1, 3), "model-00001-of-00003.iris");
  EXPECT_EQ(set_member_name("model", 12, 99999), "model-00012-of-99999.iris");
  EXPECT_EQ(set_member_name("dir/a.b.iris", 2, 2), "a.b-00002-of-00002.iris");
}

// The file a member makes of tensors [first, end): the header, then each non-empty component
// on a page of its own, the last unpadded (FORMAT.md section 1), computed here from that rule.
uint64_t member_file(const std::vector<std::vector<uint64_t>>& sizes, size_t first, size_t end, uint64_t header) {
  uint64_t at = 0, file_end = 0;
  for (size_t t = first; t < end; ++t)
    for (uint64_t b : sizes[t])
      if (b) {
        file_end = at + b;
        at = round_up(file_end, kIrisAlignment);
      }
  return header + file_end;
}

TEST(PlanSetMembers, EveryFileWithinTheLimitAndNoMemberCutEarly) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + trial % 40;
    std::vector<std::vector<uint64_t>> sizes(n);
    std::vector<std::string> names;
    for (size_t t = 0; t < n; ++t) {
      const size_t comps = rng() % 4;
      for (size_t c = 0; c < comps; ++c) sizes[t].push_back(rng() % 5 == 0 ? 0 : rng() % 3 == 0 ? 4096 * (1 + rng() % 4) : 1 + rng() % 20000);
      names.push_back("t" + std::to_string(t));
    }
    const uint64_t header = 4096 * (1 + rng() % 3);
    const uint64_t limit = header + 20000 * 4 + 16384 + rng() % 100000;
    auto runs = plan_set_members(sizes, names, header, limit);
    ASSERT_TRUE(runs.is_ok()) << runs.status().message();
    size_t next = 0;
    for (size_t r = 0; r < runs->size(); ++r) {
      const auto [first, end] = (*runs)[r];
      ASSERT_EQ(first, next) << "trial " << trial;
      ASSERT_LT(first, end) << "trial " << trial << ": an empty member";
      EXPECT_LE(member_file(sizes, first, end, header), limit) << "trial " << trial << " member " << r;
      if (end < n) EXPECT_GT(member_file(sizes, first, end + 1, header), limit) << "trial " << trial << ": member " << r << " cut early";
      next = end;
    }
    EXPECT_EQ(next, n);
  }
}

TEST(PlanSetMembers, RefusesATensorTooLargeForAnyMemberNamingIt) {
  const std::vector<std::vector<uint64_t>> sizes = {{100}, {9000, 100}, {50}};
  auto runs = plan_set_members(sizes, {"a", "big.weight", "c"}, 4096, 4096 + 9000);
  ASSERT_FALSE(runs.is_ok());
  EXPECT_NE(runs.status().message().find("'big.weight'"), std::string::npos) << runs.status().message();
  // Exactly at the limit fits (the last component is not padded).
  auto fits = plan_set_members(sizes, {"a", "big.weight", "c"}, 4096, 4096 + 12288 + 100);
  ASSERT_TRUE(fits.is_ok()) << fits.status().message();
  EXPECT_EQ(fits->size(), 3u);
}

TEST(PlanSetMembers, NoTensorsIsOneEmptyMember) {
  auto runs = plan_set_members({}, {}, 4096, 8192);
  ASSERT_TRUE(runs.is_ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0], std::make_pair(size_t(0), size_t(0)));
}

}  // namespace
}  // namespace iris
