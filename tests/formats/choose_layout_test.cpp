// choose_layout: the tile the converter gives each quantized tensor. The expected tiles are
// written out by hand from the rule in FORMAT.md section 5 ("Default tiles").
#include <gtest/gtest.h>

#include "formats/tensor_desc.h"

namespace iris {
namespace {

TensorDesc mxfp4(uint64_t n, uint64_t k) {
  return {"w", {n, k}, DType::kBF16, Format::kMxfp4,
          {{"block_size", 32}, {"element", "e2m1"}, {"nibble_order", "low_first"}, {"scale_encoding", "e8m0"}}, {}};
}

TensorDesc fp8(uint64_t n, uint64_t k) { return {"w", {n, k}, DType::kBF16, Format::kFp8E4M3, {}, {}}; }

TensorDesc nf4(uint64_t n, uint64_t k, uint64_t block) {
  return {"w", {n, k}, DType::kBF16, Format::kNf4, {{"block_size", block}}, {}};
}

uint64_t padded_k(const TensorDesc& d, const Layout& l) {
  TensorDesc t = d;
  t.layout = l;
  auto g = matrix_geometry(t);
  return g.is_ok() ? g->padded_k : 0;
}

TEST(ChooseLayout, RowsThatFillWholeTilesKeepTheDefaultWidth) {
  for (uint64_t k : {4096u, 14336u, 512u, 256u * 7}) {
    const Layout l = choose_layout(mxfp4(64, k), kDefaultTileN, kDefaultTileK);
    EXPECT_EQ(l.kind, LayoutKind::kTiled);
    EXPECT_EQ(l.tile_n, 16u);
    EXPECT_EQ(l.tile_k, 256u) << "K = " << k;
  }
}

TEST(ChooseLayout, GptOssRowsTakeTheNarrowerTileThatPadsLess) {
  const TensorDesc d = mxfp4(5760, 2880);
  const Layout l = choose_layout(d, kDefaultTileN, kDefaultTileK);
  EXPECT_EQ(l.tile_k, 128u);
  EXPECT_EQ(padded_k(d, l), 2944u);  // 23 tiles of 128; 256-wide tiles would pad to 3072
  EXPECT_EQ(choose_layout(fp8(2880, 2880), kDefaultTileN, kDefaultTileK).tile_k, 128u);
}

TEST(ChooseLayout, NeverNarrowerThanTheMinimumOrTheBlock) {
  // K = 2880 = 45 x 64: a 64-wide tile would pad nothing, but kMinTileK is 128.
  EXPECT_EQ(choose_layout(nf4(64, 2880, 64), kDefaultTileN, kDefaultTileK).tile_k, 128u);
  // Block 256: no narrower tile holds whole blocks.
  EXPECT_EQ(choose_layout(nf4(64, 256 * 3, 256), kDefaultTileN, kDefaultTileK).tile_k, 256u);
  // A wider request halves down while that pads less: K = 640 pads to 1024 at 512, to 768 at
  // 256, to 640 at 128.
  EXPECT_EQ(choose_layout(mxfp4(64, 640), kDefaultTileN, 512).tile_k, 128u);
  // Equal padding keeps the widest: K = 768 is 768 at 256 and at 128.
  EXPECT_EQ(choose_layout(mxfp4(64, 768), kDefaultTileN, 512).tile_k, 256u);
}

TEST(ChooseLayout, SmallMatricesShrinkAsBefore) {
  const Layout l = choose_layout(mxfp4(3, 64), kDefaultTileN, kDefaultTileK);
  EXPECT_EQ(l.tile_n, 3u);
  EXPECT_EQ(l.tile_k, 64u);
}

}  // namespace
}  // namespace iris
