// Reading an archive source's tiled codes back row-major (sources/tiled_codes.h) against the
// row-major bytes they were tiled from by the converter's own tile producer: every byte range
// (partial rows, stripes and matrices crossed, padding never leaking in), for 4- and 8-bit
// codes whose matrices the tiles do not divide; ranges past the end and a stored size that
// does not fit the shape are errors naming the tensor.
#include "converter/sources/tiled_codes.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "converter/pipeline/producers.h"
#include "tests/vector_sink.h"

namespace iris {
namespace {

using testing_sinks::VectorSink;

struct Case {
  const char* what;
  TensorDesc desc;
};

std::vector<Case> cases() {
  TensorDesc mx{"experts.gate_up_proj", {3, 37, 96}, DType::kBF16, Format::kMxfp4,
                {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}},
                {LayoutKind::kTiled, 16, 64}};
  TensorDesc fp8{"q_proj.weight", {2, 21, 144}, DType::kBF16, Format::kFp8E4M3,
                 {{"scale_granularity", "channel"}, {"scale_dtype", "f32"}}, {LayoutKind::kTiled, 8, 32}};
  TensorDesc one_stripe{"o_proj.weight", {5, 64}, DType::kBF16, Format::kMxfp4,
                        {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}},
                        {LayoutKind::kTiled, 16, 128}};
  TensorDesc tall{"down_proj.weight", {2, 200, 96}, DType::kBF16, Format::kFp8E4M3,
                  {{"scale_granularity", "channel"}, {"scale_dtype", "f32"}}, {LayoutKind::kTiled, 128, 64}};
  return {{"mxfp4 3x37x96 in 16x64 tiles", mx}, {"fp8 2x21x144 in 8x32 tiles", fp8}, {"mxfp4 5x64 in one 16x128 tile", one_stripe},
          {"fp8 2x200x96 in tall 128x64 tiles (a few rows read tile by tile)", tall}};
}

TEST(TiledCodes, EveryRangeReadsBackTheRowMajorBytes) {
  std::mt19937_64 rng(28);
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.what);
    auto g = matrix_geometry(c.desc);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    std::vector<uint8_t> rows(g->batch * g->n * g->row_bytes());
    for (auto& b : rows) b = uint8_t(rng());
    VectorSink tiled;
    const MappedFile rows_file = MappedFile::borrow(rows, "rows");
    ASSERT_TRUE(tile_producer(rows_file, 0, *g, c.desc.layout)(tiled).is_ok());
    const uint64_t lead = 40;  // the codes start inside a file, not at its first byte
    std::vector<uint8_t> file_bytes(lead, 0xEE);
    file_bytes.insert(file_bytes.end(), tiled.bytes.begin(), tiled.bytes.end());
    SafetensorsTensor entry{c.desc.name + "#codes", DType::kU8, {tiled.bytes.size()}, tiled.bytes.size(), lead, tiled.bytes.size()};
    const SafetensorsFile file = SafetensorsFile::from_table(MappedFile::borrow(file_bytes, "a.iris"), {entry});
    SourcePart part{Role::kCodes, SnapshotTensor{&file, &file.tensors()[0]}, TiledCodes{*g, c.desc.layout}};
    TiledScratch scratch;
    std::vector<uint8_t> got;
    auto expect_range = [&](uint64_t offset, uint64_t n) {
      got.assign(n, 0);
      const Status st = read_tiled_codes(part, offset, n, got.data(), scratch);
      ASSERT_TRUE(st.is_ok()) << st.message();
      ASSERT_TRUE(std::equal(got.begin(), got.end(), rows.begin() + offset)) << "[" << offset << ", +" << n << ")";
    };
    expect_range(0, rows.size());
    expect_range(0, 0);
    expect_range(rows.size(), 0);
    for (int i = 0; i < 300; ++i) {
      const uint64_t offset = rng() % (rows.size() + 1);
      expect_range(offset, rng() % (rows.size() - offset + 1));
    }
    // Past the end, and a stored size that is not the tiled codes of the shape.
    got.assign(2, 0);
    Status st = read_tiled_codes(part, rows.size() - 1, 2, got.data(), scratch);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(st.message().find(c.desc.name), std::string::npos) << st.message();
    SafetensorsTensor short_entry = entry;
    short_entry.size -= 1;
    const SafetensorsFile short_file = SafetensorsFile::from_table(MappedFile::borrow(file_bytes, "a.iris"), {short_entry});
    SourcePart short_part{Role::kCodes, SnapshotTensor{&short_file, &short_file.tensors()[0]}, TiledCodes{*g, c.desc.layout}};
    st = read_tiled_codes(short_part, 0, 1, got.data(), scratch);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidInput) << st.message();
  }
}

}  // namespace
}  // namespace iris
