// The copy producer against the bytes it reads: a copy through several windows (sizes around
// the window, an odd offset) arrives whole and in order; a read past the end and a failing
// sink are errors, not a short component.
#include "converter/pipeline/producers.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "tests/test_files.h"
#include "tests/vector_sink.h"

namespace iris {
namespace {

using testing_sinks::VectorSink;

class FailingSink final : public ByteSink {
 public:
  Status write(std::span<const uint8_t>) override { return io_error("disk full"); }
};

TEST(CopyProducer, SeveralWindowsArriveWholeAndInOrder) {
  testing_files::TempDir d;
  const uint64_t file_size = (5ull << 20) + 777;
  std::vector<uint8_t> data(file_size);
  std::mt19937 rng(5);
  for (auto& b : data) b = uint8_t(rng());
  const std::string path = d / "src.bin";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  for (uint64_t size : {0ull, 1ull, (1ull << 20) - 1, 1ull << 20, (1ull << 20) + 1, (3ull << 20) + 123, (5ull << 20)}) {
    const uint64_t offset = 777;
    VectorSink sink;
    ASSERT_TRUE(copy_producer(*f, offset, size)(sink).is_ok()) << size;
    ASSERT_EQ(sink.bytes.size(), size);
    EXPECT_TRUE(std::equal(sink.bytes.begin(), sink.bytes.end(), data.begin() + offset)) << size;
  }
  // Past the end of the file: the read's error, not fewer bytes.
  VectorSink sink;
  EXPECT_FALSE(copy_producer(*f, file_size - 100, 2ull << 20)(sink).is_ok());
  FailingSink failing;
  const Status st = copy_producer(*f, 0, 3ull << 20)(failing);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("disk full"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace iris
