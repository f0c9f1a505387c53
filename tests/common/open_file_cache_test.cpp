// Reading many files through few descriptors (issue 24 item 11): MappedFile in its on-demand
// mode holds no descriptor, OpenFileCache keeps at most its capacity open, and a file that is
// not the one first opened any more is an error naming it, never a crash or other bytes.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "common/open_file_cache.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
namespace fs = std::filesystem;

size_t open_descriptors() {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) n += !e.path().empty();  // the listing's own counts alike
  return n;
}

FileIdentity identity_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size)};
}

std::string pread_all(int fd, size_t n) {
  std::string s(n, '\0');
  EXPECT_EQ(pread(fd, s.data(), n, 0), ssize_t(n));
  return s;
}

TEST(OpenFileCache, KeepsAtMostItsCapacityAndReadsTheRightFiles) {
  TempDir d;
  OpenFileCache cache(4);
  std::vector<std::string> paths;
  for (int i = 0; i < 12; ++i) {
    paths.push_back(d / ("f" + std::to_string(i)));
    write_bytes(paths.back(), "file " + std::to_string(i % 10));
  }
  const size_t before = open_descriptors();
  std::shared_ptr<const SharedFd> first;
  {
    auto acquired = cache.acquire(paths[0], identity_of(paths[0]));
    ASSERT_TRUE(acquired.is_ok()) << acquired.status().message();
    first = *acquired;
  }
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 12; ++i) {
      auto fd = cache.acquire(paths[i], identity_of(paths[i]));
      ASSERT_TRUE(fd.is_ok()) << fd.status().message();
      EXPECT_EQ(pread_all((*fd)->get(), 6), "file " + std::to_string(i % 10));
    }
  EXPECT_EQ(cache.cached(), 4u);
  // Evicted long ago, the descriptor still held by a reader stays open and reads its file.
  EXPECT_EQ(pread_all(first->get(), 6), "file 0");
  EXPECT_EQ(open_descriptors(), before + 5);
  first.reset();
  EXPECT_EQ(open_descriptors(), before + 4);
}

TEST(OpenFileCache, AnotherFileOrSizeOrNoFileIsAnErrorNamingIt) {
  TempDir d;
  OpenFileCache cache(4);
  const std::string p = d / "shard.safetensors";
  write_bytes(p, "0123456789");
  const FileIdentity planned = identity_of(p);

  write_bytes(p, "0123456789abc");  // rewritten in place, longer
  auto grown = cache.acquire(p, planned);
  ASSERT_FALSE(grown.is_ok());
  EXPECT_NE(grown.status().message().find(p + ": changed while it was being read (13 bytes, was 10)"), std::string::npos)
      << grown.status().message();

  write_bytes(d / "new", "0123456789");
  fs::rename(d / "new", p);  // replaced, same size
  auto replaced = cache.acquire(p, planned);
  ASSERT_FALSE(replaced.is_ok());
  EXPECT_NE(replaced.status().message().find(p + ": replaced by another file"), std::string::npos) << replaced.status().message();

  fs::remove(p);
  auto gone = cache.acquire(p, planned);
  ASSERT_FALSE(gone.is_ok());
  EXPECT_NE(gone.status().message().find(p + ": removed while it was being read"), std::string::npos) << gone.status().message();
  EXPECT_EQ(cache.cached(), 0u);
}

TEST(MappedFileOnDemand, HoldsNoDescriptorAndReadsPastTheOpenFileLimit) {
  TempDir d;
  constexpr int kFiles = 100;
  std::vector<std::string> paths;
  for (int i = 0; i < kFiles; ++i) {
    paths.push_back(d / ("s" + std::to_string(i)));
    write_bytes(paths.back(), std::string(5000, char('a' + i % 26)));
  }
  // Fewer descriptors than files (this test runs in a process of its own under ctest).
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = 32;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);

  std::vector<MappedFile> held;
  Status refused = Status::ok();
  for (const auto& p : paths) {
    auto f = MappedFile::open(p, MappedFile::Descriptor::kHeld);
    if (!f.is_ok()) {
      refused = f.status();
      break;
    }
    held.push_back(std::move(*f));
  }
  EXPECT_FALSE(refused.is_ok()) << "the limit is real: holding a descriptor per file runs out";
  held.clear();

  const size_t before = open_descriptors();
  std::vector<MappedFile> maps;
  for (const auto& p : paths) {
    auto f = MappedFile::open(p, MappedFile::Descriptor::kOnDemand);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    maps.push_back(std::move(*f));
  }
  EXPECT_EQ(open_descriptors(), before);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < kFiles; ++i) {
      char buf[3];
      ASSERT_TRUE(maps[i].read_at(4000, buf, 3).is_ok()) << i;
      EXPECT_EQ(std::string(buf, 3), std::string(3, char('a' + i % 26)));
      EXPECT_EQ(maps[i].bytes(10, 1)[0], uint8_t('a' + i % 26));  // the map needs no descriptor
    }
  EXPECT_LE(open_descriptors(), before + OpenFileCache::shared().capacity());
  EXPECT_LE(OpenFileCache::shared().capacity(), 8u);  // a quarter of 32

  // Closing the maps gives their cached descriptors back.
  maps.clear();
  EXPECT_EQ(open_descriptors(), before);
}

TEST(MappedFileOnDemand, AFileReplacedAfterOpeningIsAnErrorNamingIt) {
  TempDir d;
  const std::string p = d / "model.safetensors";
  write_bytes(p, std::string(100, 'x'));
  auto f = MappedFile::open(p, MappedFile::Descriptor::kOnDemand);
  ASSERT_TRUE(f.is_ok());
  write_bytes(d / "other", std::string(50, 'y'));
  fs::rename(d / "other", p);
  char buf[10];
  Status st = f->read_at(0, buf, 10);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(p + ": "), std::string::npos) << st.message();
  EXPECT_EQ(f->bytes(0, 1)[0], uint8_t('x'));  // the map still shows the file that was opened
}

}  // namespace
}  // namespace iris
