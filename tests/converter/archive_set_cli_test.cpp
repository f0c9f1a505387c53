// `iris convert --max-file-size` writes an archive set (FORMAT.md section 10): every file within
// the limit, each member a valid archive of its tensors, the index opening as the whole archive
// (the same tensors, bytes and exports as the single-file conversion); `iris merge
// --max-file-size` of parts and a resumed conversion write the same set byte for byte; a set that
// is not complete and consistent (a member missing, replaced, from another conversion, renamed,
// damaged) is refused naming the member, and an existing file is never replaced without --force.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/hashing.h"
#include "formats/iris_archive.h"
#include "tests/cli_runner.h"
#include "tests/rewrite_manifest.h"
#include "tests/sanitizer_scale.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

// The files of the set whose index is `index`, members in order (by their names).
std::vector<std::string> set_files(const std::string& index) {
  const fs::path p(index);
  std::string stem = p.filename().string();
  stem = stem.substr(0, stem.size() - 5);
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    const std::string n = e.path().filename().string();
    if (n.rfind(stem + "-", 0) == 0 && n.find("-of-") != std::string::npos) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Case {
  std::string fixture, options, limit;
};
const Case kCases[] = {{"llama-bf16", "", "400KB"},        {"llama-bf16", "--quant nf4", "300KiB"},
                       {"llama-bf16", "--quant mxfp4", "300KB"}, {"gptoss-mxfp4", "", "1MB"},
                       {"llama-fp8-block", "--quant fp8-channel", "300KB"}, {"llama-nf4-dq", "", "350KB"}};

uint64_t limit_bytes(const std::string& text) {
  const uint64_t n = std::stoull(text);
  if (text.find("KiB") != std::string::npos) return n << 10;
  if (text.find("KB") != std::string::npos) return n * 1000;
  return n * 1000000;
}

TEST(ArchiveSet, EachFileWithinTheLimitAndTheSetReadsAsTheWholeArchive) {
  for (const Case& c : iris::test_scale::inputs(kCases)) {  // under the sanitizer, every other case
    SCOPED_TRACE(c.fixture + " " + c.options + " " + c.limit);
    TempDir d;
    ASSERT_EQ(run("convert " + kFix + c.fixture + " -o " + (d / "whole.iris") + " -q " + c.options).rc, 0);
    const auto r = run("convert " + kFix + c.fixture + " -o " + (d / "set.iris") + " -q " + c.options + " --max-file-size " + c.limit);
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto members = set_files(d / "set.iris");
    ASSERT_GE(members.size(), 2u) << "the limit should need several files";
    for (const auto& m : members) EXPECT_LE(fs::file_size(m), limit_bytes(c.limit)) << m;
    // The index: a magic older readers refuse, and the version that has sets.
    const std::string index = read_all(d / "set.iris");
    EXPECT_EQ(index.substr(0, 8), "IRISSET2");
    // Each member alone is a valid archive (verify passes) marked as a member.
    for (size_t i = 0; i < members.size(); ++i) {
      const auto v = run("verify " + members[i] + " -q");
      EXPECT_EQ(v.rc, 0) << members[i] << ": " << v.out;
      const auto j = nlohmann::json::parse(run("inspect " + members[i] + " --json").out);
      EXPECT_EQ(j["format_version"], "2.2");
      EXPECT_EQ(j["set_member"]["index"], i + 1);
      EXPECT_EQ(j["set_member"]["count"], members.size());
    }
    // Opened as one archive: the whole archive's tensors, in order, with the same bytes.
    auto whole = IrisArchive::open(d / "whole.iris");
    auto set = IrisArchive::open(d / "set.iris");
    ASSERT_TRUE(whole.is_ok() && set.is_ok()) << (set.is_ok() ? "" : set.status().message());
    EXPECT_TRUE(set->is_set());
    EXPECT_EQ(set->file_count(), members.size() + 1);
    ASSERT_EQ(set->manifest().tensors.size(), whole->manifest().tensors.size());
    for (size_t t = 0; t < whole->manifest().tensors.size(); ++t) {
      const auto& a = whole->manifest().tensors[t];
      const auto& b = set->manifest().tensors[t];
      ASSERT_EQ(a.desc.name, b.desc.name);
      ASSERT_EQ(a.components.size(), b.components.size());
      for (size_t k = 0; k < a.components.size(); ++k) {
        const auto x = whole->bytes(a.components[k]), y = set->bytes(b.components[k]);
        EXPECT_TRUE(x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size()) == 0) << a.desc.name;
        EXPECT_EQ(a.components[k].xxh3, b.components[k].xxh3);
        EXPECT_GE(b.components[k].file, 1u);  // tensors live in members, never in the index
      }
    }
    EXPECT_EQ(set->manifest().files.size(), whole->manifest().files.size());
    // The CLI reads it as the whole archive: verify, and the exports equal file for file.
    const auto v = run("verify " + (d / "set.iris") + " -q");
    EXPECT_EQ(v.rc, 0) << v.out;
    for (const char* dtype : {"keep", "bf16"}) {
      ASSERT_EQ(run("export " + (d / "whole.iris") + " -o " + (d / ("ew-" + std::string(dtype))) + "/ -q --dtype " + dtype).rc, 0);
      ASSERT_EQ(run("export " + (d / "set.iris") + " -o " + (d / ("es-" + std::string(dtype))) + "/ -q --dtype " + dtype).rc, 0);
      const auto a = names_in(d / ("ew-" + std::string(dtype))), b = names_in(d / ("es-" + std::string(dtype)));
      ASSERT_EQ(a, b);
      for (const auto& n : a)
        EXPECT_TRUE(read_all(d / ("ew-" + std::string(dtype)) + "/" + n) == read_all(d / ("es-" + std::string(dtype)) + "/" + n)) << n;
    }
  }
}

TEST(ArchiveSet, MergedPartsAndAResumedRunWriteTheSameSetByteForByte) {
  for (const Case& c : iris::test_scale::inputs(kCases)) {  // under the sanitizer, every other case
    SCOPED_TRACE(c.fixture + " " + c.options + " " + c.limit);
    TempDir d;
    fs::create_directories(d / "a");
    fs::create_directories(d / "b");
    fs::create_directories(d / "c");
    ASSERT_EQ(run("convert " + kFix + c.fixture + " -o " + (d / "a/s.iris") + " -q " + c.options + " --max-file-size " + c.limit).rc, 0);
    std::string parts;
    for (int i = 1; i <= 3; ++i) {
      const std::string p = d / ("p" + std::to_string(i) + ".iris");
      ASSERT_EQ(run("convert " + kFix + c.fixture + " -o " + p + " -q " + c.options + " --part " + std::to_string(i) + "/3").rc, 0);
      parts = p + " " + parts;
    }
    const auto m = run("merge " + parts + "-o " + (d / "b/s.iris") + " -q --max-file-size " + c.limit);
    ASSERT_EQ(m.rc, 0) << m.out;
    const auto r = run("convert " + kFix + c.fixture + " -o " + (d / "c/s.iris") + " -q " + c.options + " --max-file-size " + c.limit +
                       " --resume --resume-every 100KB");
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto names = names_in(d / "a");
    EXPECT_EQ(names, names_in(d / "b"));
    EXPECT_EQ(names, names_in(d / "c"));
    for (const auto& n : names) {
      const std::string want = read_all(d / ("a/" + n));
      EXPECT_TRUE(read_all(d / ("b/" + n)) == want) << "merge: " << n;
      EXPECT_TRUE(read_all(d / ("c/" + n)) == want) << "resume: " << n;
    }
  }
}

// One line naming `named`, a non-zero exit.
void expect_refused(const std::string& args, const std::string& named) {
  const auto r = run(args);
  EXPECT_NE(r.rc, 0) << args;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(ArchiveSet, ASetThatIsNotCompleteAndConsistentIsRefusedNamingTheMember) {
  TempDir d;
  const std::string src = kFix + "llama-bf16";
  ASSERT_EQ(run("convert " + src + " -o " + (d / "s.iris") + " -q --quant nf4 --max-file-size 320KB").rc, 0);
  ASSERT_EQ(run("convert " + src + " -o " + (d / "o.iris") + " -q --quant mxfp4 --max-file-size 320KB").rc, 0);
  const auto members = set_files(d / "s.iris");
  const auto others = set_files(d / "o.iris");
  ASSERT_GE(members.size(), 3u);
  ASSERT_GE(others.size(), 2u);
  const std::string second = fs::path(members[1]).filename().string();
  const std::string kept = read_all(members[1]);
  for (const char* cmd : {"verify ", "inspect ", "export "}) {
    const std::string tail = std::string(cmd) == "export " ? " -o " + (d / "x") + "/ -q" : std::string(cmd) == "verify " ? " -q" : "";
    fs::remove(members[1]);  // missing
    expect_refused(cmd + (d / "s.iris") + tail, second + ": no such file");
    write_bytes(members[1], read_all(others[1]));  // from another conversion
    expect_refused(cmd + (d / "s.iris") + tail, "(" + second + "): is not the file this index lists");
    write_bytes(members[1], kept);
  }
  // Two members swapped under each other's names.
  const std::string first = read_all(members[0]);
  write_bytes(members[0], kept);
  write_bytes(members[1], first);
  expect_refused("verify " + (d / "s.iris"), "is not the file this index lists");
  write_bytes(members[0], first);
  write_bytes(members[1], kept);
  // A member truncated; a member whose record was rewritten with a valid checksum is still not
  // the file the index pins (its manifest checksum differs).
  write_bytes(members[1], kept.substr(0, kept.size() - 1));
  expect_refused("verify " + (d / "s.iris"), second);
  write_bytes(members[1], kept);
  // A flipped byte inside a tensor of a member: verify fails that tensor's checksum.
  std::string damaged = kept;
  damaged[damaged.size() - 10] ^= 0x40;
  write_bytes(members[1], damaged);
  const auto v = run("verify " + (d / "s.iris"));
  EXPECT_EQ(v.rc, 4) << v.out;
  EXPECT_NE(v.out.find("checksum"), std::string::npos) << v.out;
  write_bytes(members[1], kept);
  EXPECT_EQ(run("verify " + (d / "s.iris") + " -q").rc, 0);
  // An index whose magic was changed to a single archive's (checksum made good): refused.
  std::string index = read_all(d / "s.iris");
  std::memcpy(index.data(), "IRISMDL2", 8);
  const uint64_t h = xxh3_64(index.data(), 56);
  std::memcpy(index.data() + 56, &h, 8);
  write_bytes(d / "t.iris", index);
  expect_refused("verify " + (d / "t.iris"), "not an archive set's index");
}

// An index whose set record lists an index (itself: a cycle) as a member, checksums made good:
// refused naming it, not followed.
TEST(ArchiveSet, AnIndexListedAsAMemberIsRefusedNotFollowed) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "s.iris") + " -q --max-file-size 400KB").rc, 0);
  rewrite_manifest(d / "s.iris", d / "loop.iris", [](nlohmann::json& m) { m["set"]["files"][0]["name"] = "loop.iris"; });
  const auto r = run("verify " + (d / "loop.iris"));
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.out.find("is itself an archive set's index"), std::string::npos) << r.out;
  // A record that claims 2^40 tensors (the runs still adding up): refused by the members' counts,
  // with no allocation sized by the claim.
  rewrite_manifest(d / "s.iris", d / "huge.iris", [](nlohmann::json& m) {
    const uint64_t extra = uint64_t(1) << 40;
    m["set"]["tensors"] = m["set"]["tensors"].get<uint64_t>() + extra;
    auto& last = m["set"]["files"].back();
    last["tensors"] = last["tensors"].get<uint64_t>() + extra;
  });
  const auto h = run("verify " + (d / "huge.iris"));
  EXPECT_EQ(h.rc, 3) << h.out;
  EXPECT_NE(h.out.find("does not match the index"), std::string::npos) << h.out;
}

// --force over a set of another count: the old members go with the old index.
TEST(ArchiveSet, ReplacingASetRemovesTheMembersOfTheOldOne) {
  TempDir d;
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "s.iris") + " -q --max-file-size 400KB").rc, 0);
  const size_t before = set_files(d / "s.iris").size();
  ASSERT_EQ(run("convert " + kFix + "llama-bf16 -o " + (d / "s.iris") + " -q --max-file-size 1MB --force").rc, 0);
  const auto after = set_files(d / "s.iris");
  EXPECT_LT(after.size(), before);
  EXPECT_EQ(names_in(d.path).size(), after.size() + 1);  // the new members and the index, nothing else
  EXPECT_EQ(run("verify " + (d / "s.iris") + " -q").rc, 0);
}

TEST(ArchiveSet, NeverReplacesAFileWithoutForceAndWritesNothingOnRefusal) {
  TempDir d, names;
  const std::string src = kFix + "llama-bf16";
  // A member name that exists (the names learnt from the same conversion elsewhere): refused
  // before anything is written.
  ASSERT_EQ(run("convert " + src + " -o " + (names / "s.iris") + " -q --max-file-size 400KB").rc, 0);
  const std::string second = fs::path(set_files(names / "s.iris").at(1)).filename().string();
  write_bytes(d / second, "mine");
  const auto r = run("convert " + src + " -o " + (d / "s.iris") + " -q --max-file-size 400KB");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(second), std::string::npos) << r.out;
  EXPECT_EQ(read_all(d / second), "mine");
  EXPECT_EQ(names_in(d.path), std::vector<std::string>{second});
  // With --force it is replaced, and the set reads.
  ASSERT_EQ(run("convert " + src + " -o " + (d / "s.iris") + " -q --max-file-size 400KB --force").rc, 0);
  EXPECT_EQ(run("verify " + (d / "s.iris") + " -q").rc, 0);
  // A tensor larger than any member: refused naming it, nothing written.
  TempDir e;
  expect_refused("convert " + src + " -o " + (e / "s.iris") + " --max-file-size 200KB", "'model.embed_tokens.weight'");
  EXPECT_TRUE(names_in(e.path).empty());
  // --part writes single files: the set comes from merge.
  expect_refused("convert " + src + " -o " + (e / "p.iris") + " --part 1/2 --max-file-size 1MB", "--max-file-size");
  expect_refused("convert " + src + " -o " + (e / "p.iris") + " --max-file-size 0", "--max-file-size");
  EXPECT_TRUE(names_in(e.path).empty());
}

TEST(ArchiveSet, ReportsListEveryFile) {
  TempDir d;
  const auto r = testing_cli::run_stdout("convert " + kFix + "llama-bf16 -o " + (d / "s.iris") + " --json --max-file-size 400KB");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto members = set_files(d / "s.iris");
  ASSERT_EQ(j["set_files"].size(), members.size() + 1);
  uint64_t total = 0;
  for (const auto& f : j["set_files"]) {
    EXPECT_EQ(f["bytes"].get<uint64_t>(), fs::file_size(f["path"].get<std::string>()));
    total += f["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), total);
  const auto i = nlohmann::json::parse(run("inspect " + (d / "s.iris") + " --json").out);
  EXPECT_EQ(i["set"]["files"].size(), members.size() + 1);
  EXPECT_EQ(i["file_bytes"].get<uint64_t>(), total);
}

}  // namespace
}  // namespace iris
