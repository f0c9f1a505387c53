// `iris convert --resume`: killed with SIGKILL at points through the run (set by the segments
// its journal holds) and started again, the conversion ends with the bytes of an uninterrupted
// one; a journal of other options or another source is refused naming it; a damaged segment is
// made again; the user's files are never replaced.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using testing_cli::run_shell;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();
const std::string kSrc = kFix + "llama-bf16";
const std::string kOpts = " --quant nf4 --resume --resume-every 16KiB";  // a segment a tensor

std::string whole_archive(const TempDir& d) {
  EXPECT_EQ(run("convert " + kSrc + " -o " + (d / "whole.iris") + " -q --quant nf4").rc, 0);
  return read_all(d / "whole.iris");
}

TEST(Resume, AnArchiveSourceResumesToThePlainArchive) {
  // An archive is read in place (no export to a folder per segment): a resumable run from it,
  // killed after some segments and started again, ends with the bytes of a plain run from it.
  TempDir d;
  ASSERT_EQ(run("convert " + kSrc + " -o " + (d / "src.iris") + " -q --quant fp8-channel").rc, 0);
  ASSERT_EQ(run("convert " + (d / "src.iris") + " -o " + (d / "plain.iris") + " -q --quant nf4").rc, 0);
  const std::string src = d / "src.iris", journal = d / "r.iris.resume";
  run_shell("(" + test_paths::iris_binary() + " convert " + src + " -o " + (d / "r.iris") + " -q --threads 1" + kOpts +
            " & pid=$!; tries=0; while kill -0 $pid 2>/dev/null && [ $tries -lt 30000 ] && "
            "[ $(ls " + journal + " 2>/dev/null | grep -c segment) -lt 3 ]; do sleep 0.001; tries=$((tries+1)); done; "
            "kill -9 $pid; wait $pid) > /dev/null 2>&1");
  const auto r = run("convert " + src + " -o " + (d / "r.iris") + " -q" + kOpts);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(read_all(d / "r.iris") == read_all(d / "plain.iris"));
  EXPECT_FALSE(fs::exists(journal));
}

TEST(Resume, AnUninterruptedResumableRunIsThePlainArchiveAndLeavesNoJournal) {
  TempDir d;
  const std::string whole = whole_archive(d);
  const auto r = run("convert " + kSrc + " -o " + (d / "r.iris") + " -q" + kOpts);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(read_all(d / "r.iris") == whole);
  EXPECT_FALSE(fs::exists(d / "r.iris.resume"));
}

// Starts a one-thread conversion to `out` and kills it with SIGKILL once its journal holds
// `segments` committed segments (then `after` seconds more, to land inside the next one), or
// at once if it ended first. Kill points are set by progress, not by wall time: a slow
// machine or a sanitizer build starts late, and a fixed delay would kill every run before
// its first segment (or, on a fast one, after its last).
void kill_after_segments(const TempDir& d, const std::string& out, int segments, double after, const std::string& extra = "") {
  const std::string journal = d / (out + ".resume");
  run_shell("(" + test_paths::iris_binary() + " convert " + kSrc + " -o " + (d / out) + " -q --threads 1" + kOpts + extra +
            " & pid=$!; tries=0; "
            "while kill -0 $pid 2>/dev/null && [ $tries -lt 30000 ] && "
            "[ $(ls " + journal + " 2>/dev/null | grep -c segment) -lt " + std::to_string(segments) + " ]; "
            "do sleep 0.001; tries=$((tries+1)); done; sleep " + std::to_string(after) + "; kill -9 $pid; wait $pid) > /dev/null 2>&1");
}

TEST(Resume, KilledAtRandomPointsAndStartedAgainEndsWithTheSameBytes) {
  TempDir d;
  const std::string whole = whole_archive(d);
  int killed_midway = 0;
  // The fixture is 21 tensors, a segment each: kills before the first segment, after some,
  // and near the end, each also a moment later (inside a segment being written).
  const int after_segments[] = {0, 1, 2, 4, 6, 9, 12, 15, 18, 20};
  for (int trial = 0; trial < 10; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    fs::remove_all(d / "k.iris.resume");
    fs::remove(d / "k.iris");
    kill_after_segments(d, "k.iris", after_segments[trial], 0.002 * (trial % 3));
    const bool journal = fs::exists(d / "k.iris.resume");
    if (journal && !fs::exists(d / "k.iris")) ++killed_midway;
    if (!journal && fs::exists(d / "k.iris")) {  // it ended before the kill (or was removing its journal)
      EXPECT_TRUE(read_all(d / "k.iris") == whole);
      continue;
    }
    const auto again = run("convert " + kSrc + " -o " + (d / "k.iris") + " -q" + kOpts);
    ASSERT_EQ(again.rc, 0) << again.out;
    EXPECT_TRUE(read_all(d / "k.iris") == whole);
    EXPECT_FALSE(fs::exists(d / "k.iris.resume"));
  }
  EXPECT_GE(killed_midway, 5) << "fewer than half the trials killed the conversion while it ran: the test barely tested resuming";
}

// A journal with committed segments, left as a kill leaves it: a run stopped by a read-only
// output folder after its first segments would need root to set up, so the journal is made by
// a killed run and checked to hold at least one segment.
bool killed_with_segments(const TempDir& d, const std::string& out, const std::string& extra = "") {
  for (int trial = 0; trial < 20; ++trial) {
    fs::remove_all(d / (out + ".resume"));
    fs::remove(d / out);
    kill_after_segments(d, out, 2, 0, extra);
    if (fs::exists(d / (out + ".resume")) && !fs::exists(d / out)) return true;
  }
  return false;
}

TEST(Resume, RefusesAJournalOfOtherOptionsOrAnotherSourceNamingIt) {
  TempDir d;
  ASSERT_TRUE(killed_with_segments(d, "k.iris"));
  const auto names_before = names_in(d / "k.iris.resume");
  for (const std::string other : {" --quant mxfp4 --resume --resume-every 16KiB", " --quant nf4 --resume --resume-every 32KiB"}) {
    const auto r = run("convert " + kSrc + " -o " + (d / "k.iris") + other);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("k.iris.resume"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  fs::copy(kSrc, d / "changed");
  const std::string shard = d / "changed/model-00001-of-00004.safetensors";
  std::string bytes = read_all(shard);
  bytes[bytes.size() - 2] ^= 0x01;
  write_bytes(shard, bytes);
  const auto r = run("convert " + (d / "changed") + " -o " + (d / "k.iris") + kOpts);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("k.iris.resume"), std::string::npos) << r.out;
  EXPECT_EQ(names_in(d / "k.iris.resume"), names_before);  // the journal is left as it was
  EXPECT_FALSE(fs::exists(d / "k.iris"));
}

TEST(Resume, ADamagedSegmentIsMadeAgain) {
  TempDir d;
  const std::string whole = whole_archive(d);
  ASSERT_TRUE(killed_with_segments(d, "k.iris"));
  for (const auto& name : names_in(d / "k.iris.resume"))
    if (name.find("segment-1-") == 0) {
      const std::string path = d / ("k.iris.resume/" + name);
      std::string b = read_all(path);
      b[b.size() - 1] ^= 0x20;
      write_bytes(path, b);
    }
  const auto r = run("convert " + kSrc + " -o " + (d / "k.iris") + " -q" + kOpts);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(read_all(d / "k.iris") == whole);
}

// A part run (--part) resumed: its segments are cut from the part's run of tensors and joined
// into the part's own file, the bytes `convert --part` writes; with the other parts it merges
// into the whole archive. A journal of another part is refused.
TEST(Resume, AResumedPartIsThePartByteForByte) {
  TempDir d;
  const std::string whole = whole_archive(d);
  ASSERT_EQ(run("convert " + kSrc + " -o " + (d / "p2.iris") + " -q --quant nf4 --part 2/3").rc, 0);
  ASSERT_TRUE(killed_with_segments(d, "k2.iris", " --part 2/3"));
  const auto other = run("convert " + kSrc + " -o " + (d / "k2.iris") + kOpts + " --part 3/3");
  EXPECT_EQ(other.rc, 2) << other.out;
  EXPECT_NE(other.out.find("k2.iris.resume"), std::string::npos) << other.out;
  const auto again = run("convert " + kSrc + " -o " + (d / "k2.iris") + " -q" + kOpts + " --part 2/3");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_TRUE(read_all(d / "k2.iris") == read_all(d / "p2.iris"));
  EXPECT_FALSE(fs::exists(d / "k2.iris.resume"));
  ASSERT_EQ(run("convert " + kSrc + " -o " + (d / "p1.iris") + " -q --quant nf4 --part 1/3").rc, 0);
  ASSERT_EQ(run("convert " + kSrc + " -o " + (d / "p3.iris") + " -q" + kOpts + " --part 3/3").rc, 0);
  const auto m = run("merge " + (d / "p3.iris") + " " + (d / "k2.iris") + " " + (d / "p1.iris") + " -o " + (d / "m.iris") + " -q");
  ASSERT_EQ(m.rc, 0) << m.out;
  EXPECT_TRUE(read_all(d / "m.iris") == whole);
}

TEST(Resume, NeverReplacesTheUsersFiles) {
  TempDir d;
  // An output folder of that name that is not a journal.
  fs::create_directory(d / "a.iris.resume");
  write_bytes(d / "a.iris.resume/mine.txt", "mine");
  auto r = run("convert " + kSrc + " -o " + (d / "a.iris") + kOpts);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("not an iris resume journal"), std::string::npos) << r.out;
  EXPECT_EQ(read_all(d / "a.iris.resume/mine.txt"), "mine");
  // A journal, and a file of the user's under the output's name (not the journal's merge).
  ASSERT_TRUE(killed_with_segments(d, "k.iris"));
  write_bytes(d / "k.iris", "mine");
  r = run("convert " + kSrc + " -o " + (d / "k.iris") + kOpts);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(read_all(d / "k.iris"), "mine");
  // An output or report that is one of the source's files is refused, --force or not.
  fs::copy(kSrc, d / "src");
  const std::string shard = d / "src/model-00001-of-00004.safetensors", config = d / "src/config.json";
  const std::string shard_bytes = read_all(shard), config_bytes = read_all(config);
  r = run("convert " + (d / "src") + " -o " + shard + " --force" + kOpts);
  EXPECT_EQ(r.rc, 2) << r.out;
  r = run("convert " + (d / "src") + " -o " + (d / "z.iris") + " --report " + config + " --force" + kOpts);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(read_all(shard), shard_bytes);
  EXPECT_EQ(read_all(config), config_bytes);
  EXPECT_FALSE(fs::exists(d / "z.iris"));
  // --resume-every without --resume, and a zero size, are usage errors.
  EXPECT_EQ(run("convert " + kSrc + " -o " + (d / "x.iris") + " --resume-every 1MiB").rc, 2);
  EXPECT_EQ(run("convert " + kSrc + " -o " + (d / "x.iris") + " --resume --resume-every 0").rc, 2);
  EXPECT_FALSE(fs::exists(d / "x.iris"));
}

}  // namespace
}  // namespace iris
