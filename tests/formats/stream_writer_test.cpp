// StreamWriter (common/stream_writer.h): the bytes on disk are exactly what was written, with
// zeros in the gaps, for direct I/O and the page cache alike, across buffer hand-offs; misuse
// and write failures come back as errors, and an unfinished stream stops cleanly.
#include "common/stream_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "tests/test_files.h"

namespace iris {
namespace {

using testing_files::TempDir;

std::vector<uint8_t> read_all(const std::string& path) {
  std::vector<uint8_t> out;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  uint8_t buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.insert(out.end(), buf, buf + n);
  ::close(fd);
  return out;
}

struct Shape {
  bool direct;
  size_t buffer_bytes;
  int buffers;
};

class StreamWriterContent : public ::testing::TestWithParam<Shape> {};

// Random starts (inside a page), write sizes from 0 to several buffers, and gaps, each write
// by write() or in place by room() + commit(); the owner's part before `start` written
// afterwards, as the archive writer does with its header.
TEST_P(StreamWriterContent, FileHoldsTheWrittenBytesAndZerosInTheGaps) {
  const Shape shape = GetParam();
  std::mt19937_64 rng(0x5eed ^ shape.buffer_bytes ^ uint64_t(shape.direct));
  for (int round = 0; round < 6; ++round) {
    TempDir dir;
    const std::string path = dir / "out.bin";
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    const uint64_t start = round == 0 ? 0 : 1 + rng() % 9000;
    std::vector<uint8_t> want(start, 0);
    {
      StreamWriter w(fd, start, path, {shape.direct, shape.buffer_bytes, shape.buffers});
      const int writes = 1 + int(rng() % 12);
      for (int i = 0; i < writes; ++i) {
        const uint64_t gap = rng() % 3 == 0 ? rng() % 5000 : 0;
        const uint64_t n = rng() % 4 == 0 ? 0 : rng() % (3 * shape.buffer_bytes + 7);
        std::vector<uint8_t> bytes(n);
        for (auto& b : bytes) b = uint8_t(rng());
        const uint64_t at = want.size() + gap;
        if (rng() % 2) {
          ASSERT_TRUE(w.write(at, bytes).is_ok());
        } else {  // in place: room() then commit(), sometimes of less than the room given
          for (uint64_t done = 0; done < n;) {
            auto room = w.room(at + done, n - done);
            ASSERT_TRUE(room.is_ok()) << room.status().message();
            ASSERT_FALSE(room->empty());
            ASSERT_LE(room->size(), n - done);
            const uint64_t take = rng() % 3 == 0 ? 1 + rng() % room->size() : room->size();
            std::copy(bytes.begin() + done, bytes.begin() + done + take, room->begin());
            ASSERT_TRUE(w.commit(take).is_ok());
            done += take;
          }
        }
        want.resize(at, 0);
        want.insert(want.end(), bytes.begin(), bytes.end());
      }
      const uint64_t end = want.size() + (rng() % 2 ? rng() % 3000 : 0);
      want.resize(end, 0);
      Status s = w.finish(end);
      ASSERT_TRUE(s.is_ok()) << s.message();
      RecordProperty("direct_io", w.wrote_direct() ? "yes" : shape.direct ? "no (the filesystem refused it)" : "no (page cache asked for)");
    }
    ASSERT_EQ(ftruncate(fd, off_t(want.size())), 0);
    std::vector<uint8_t> head(start);
    for (auto& b : head) b = uint8_t(rng());
    ASSERT_EQ(pwrite(fd, head.data(), head.size(), 0), ssize_t(head.size()));
    std::copy(head.begin(), head.end(), want.begin());
    ::close(fd);
    const std::vector<uint8_t> got = read_all(path);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    EXPECT_TRUE(got == want) << "round " << round << ": the file differs from what was written";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, StreamWriterContent,
                         ::testing::Values(Shape{true, 4096, 2}, Shape{true, 64 << 10, 3}, Shape{false, 64 << 10, 2},
                                           Shape{true, size_t(4) << 20, 3},  // on 2 MiB pages (allocate_buffer), as the default
                                           Shape{false, size_t(2) << 20, 2}));

// Two streams on one descriptor, each on its own thread, share the file page by page: each
// writes its ranges and skip_to()s over the other's. The file holds both, and the
// descriptor's flags come back once, from the shared DirectIo.
TEST(StreamWriter, TwoStreamsSkippingEachOthersPagesFillOneFile) {
  for (bool direct : {true, false}) {
    std::mt19937_64 rng(direct ? 11 : 12);
    TempDir dir;
    const std::string path = dir / "out.bin";
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    const int flags = fcntl(fd, F_GETFL);
    // Alternating page-aligned ranges of random lengths; a range's tail pads to its page.
    struct Range {
      uint64_t at;
      std::vector<uint8_t> bytes;
    };
    std::vector<Range> ranges[2];
    std::vector<uint8_t> want;
    for (int i = 0; i < 14; ++i) {
      const uint64_t n = 1 + rng() % (i % 3 == 0 ? 300000 : 9000);
      Range r{want.size(), std::vector<uint8_t>(n)};
      for (auto& b : r.bytes) b = uint8_t(rng());
      want.insert(want.end(), r.bytes.begin(), r.bytes.end());
      want.resize((want.size() + 4095) / 4096 * 4096, 0);
      ranges[i % 2].push_back(std::move(r));
    }
    const uint64_t end = ranges[1].back().at + ranges[1].back().bytes.size();
    want.resize(end);
    Status st[2];
    {
      DirectIo shared(fd, direct);
      auto run = [&](int s) {
        StreamWriter w(fd, ranges[s][0].at, path, {direct, 64 << 10, 3, &shared});
        for (const auto& r : ranges[s]) {
          st[s] = w.skip_to(r.at);
          if (st[s].is_ok()) st[s] = w.write(r.at, r.bytes);
          if (!st[s].is_ok()) return;
        }
        const auto& last = ranges[s].back();
        st[s] = w.finish(last.at + last.bytes.size());
      };
      std::thread other(run, 1);
      run(0);
      other.join();
      EXPECT_TRUE(shared.restore());
    }
    ASSERT_TRUE(st[0].is_ok()) << st[0].message();
    ASSERT_TRUE(st[1].is_ok()) << st[1].message();
    EXPECT_EQ(fcntl(fd, F_GETFL), flags);
    ASSERT_EQ(ftruncate(fd, off_t(end)), 0);
    ::close(fd);
    const std::vector<uint8_t> got = read_all(path);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "direct " << direct << ": the file differs from what the two streams wrote";
  }
}

// skip_to() only to a page boundary at or past the end of the current page.
TEST(StreamWriter, SkippingIntoTheCurrentPageOrOffAPageIsAnError) {
  TempDir dir;
  int fd = ::open((dir / "f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  {
    StreamWriter w(fd, 0, "f");
    const std::vector<uint8_t> b(5000, 1);
    ASSERT_TRUE(w.write(0, b).is_ok());
    EXPECT_FALSE(w.skip_to(4096).is_ok());   // inside the page holding byte 5000
    EXPECT_FALSE(w.skip_to(12289).is_ok());  // not a page boundary
    EXPECT_TRUE(w.skip_to(8192).is_ok());    // the end of the current page: no skip at all
    EXPECT_TRUE(w.skip_to(16384).is_ok());
    EXPECT_TRUE(w.write(16384, b).is_ok());
  }
  ::close(fd);
}

TEST(StreamWriter, WritingBackwardsIsAnError) {
  TempDir dir;
  int fd = ::open((dir / "f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  {
    StreamWriter w(fd, 100, "f");
    const uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_TRUE(w.write(100, b).is_ok());
    Status s = w.write(104, b);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("before the end of the previous one"), std::string::npos) << s.message();
  }
  ::close(fd);
}

// A descriptor that cannot be written: the failure comes back (from write() or finish()),
// naming the file, and nothing hangs.
TEST(StreamWriter, RoomBeforeTheEndOrCommitPastTheRoomIsAnError) {
  TempDir dir;
  const std::string path = dir / "out.bin";
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  {
    StreamWriter w(fd, 0, path, {false, 8192, 2});
    std::vector<uint8_t> bytes(100, 7);
    ASSERT_TRUE(w.write(0, bytes).is_ok());
    EXPECT_FALSE(w.room(50, 10).is_ok());
    auto room = w.room(100, 1 << 20);
    ASSERT_TRUE(room.is_ok());
    EXPECT_EQ(room->size(), 8192u - 100);  // up to the buffer's end
    EXPECT_FALSE(w.commit(8192).is_ok());
    EXPECT_TRUE(w.commit(0).is_ok());
    EXPECT_TRUE(w.finish(100).is_ok());
  }
  ::close(fd);
}

TEST(StreamWriter, WriteFailureIsReportedWithTheFileName) {
  TempDir dir;
  const std::string path = dir / "ro";
  testing_files::write_bytes(path, "x");
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  {
    StreamWriter w(fd, 0, path, {true, 4096, 2});
    std::vector<uint8_t> bytes(64 << 10, 7);
    Status s = w.write(0, bytes);
    if (s.is_ok()) s = w.finish(bytes.size());
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("write failed"), std::string::npos) << s.message();
  }
  ::close(fd);
}

// Destroyed mid-stream (a producer failed): the thread stops and the descriptor gets its
// flags back.
TEST(StreamWriter, UnfinishedStreamStopsAndRestoresTheDescriptor) {
  TempDir dir;
  int fd = ::open((dir / "f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  const int flags = fcntl(fd, F_GETFL);
  {
    StreamWriter w(fd, 0, "f", {true, 4096, 2});
    std::vector<uint8_t> bytes(40000, 3);
    ASSERT_TRUE(w.write(0, bytes).is_ok());
  }
  EXPECT_EQ(fcntl(fd, F_GETFL), flags);
  ::close(fd);
}

}  // namespace
}  // namespace iris
