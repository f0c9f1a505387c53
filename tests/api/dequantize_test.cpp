// iris_dequantize_rows against three oracles: the reference tools' own outputs (transformers,
// bitsandbytes, torch; tests/data/fixtures/refs), `iris export --dtype` (the same bits by
// promise), and itself over the whole tensor (row ranges are slices of it).
#include <cstring>
#include <random>

#include "iris/iris.h"
#include "tests/api/capi_fixture.h"
#include "tests/quant/st_reader.h"

namespace iris::capi_test {
namespace {

using quant::test::StFile;

std::vector<uint16_t> dequant_bf16(iris_archive* a, const std::string& name, iris_tensor_info* info) {
  uint64_t i = 0;
  EXPECT_EQ(iris_archive_find_tensor(a, name.c_str(), &i, nullptr, 0), IRIS_OK) << name;
  EXPECT_EQ(iris_archive_tensor_info(a, i, info, nullptr, 0), IRIS_OK);
  std::vector<uint16_t> out(info->numel);
  char msg[512];
  EXPECT_EQ(iris_dequantize(a, i, IRIS_DTYPE_BF16, out.data(), out.size() * 2, 0, msg, sizeof msg), IRIS_OK) << msg;
  return out;
}

TEST(CApiDequantize, GptOssMxfp4EqualsTransformersBitForBit) {
  auto a = open_archive(converted("gptoss-mxfp4"));
  ASSERT_TRUE(a);
  StFile ref(kFix + "refs/gptoss-mxfp4.dequant.transformers.safetensors");
  int checked = 0;
  for (const auto& [name, rt] : ref.tensors()) {
    if (rt.shape.size() != 3) continue;  // the biases are raw tensors, compared with export below
    iris_tensor_info info;
    const auto got = dequant_bf16(a.get(), name, &info);
    ASSERT_EQ(info.format, IRIS_FORMAT_MXFP4) << name;
    const uint64_t e = info.shape[0], n = info.shape[1], k = info.shape[2];
    ASSERT_EQ(rt.shape, (std::vector<uint64_t>{e, k, n}));  // transformers holds [E, K, N]
    const auto want = rt.as<uint16_t>();
    for (uint64_t x = 0; x < e; ++x)
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < k; ++c)
          ASSERT_EQ(got[(x * n + r) * k + c], want[(x * k + c) * n + r]) << name << " expert " << x << " row " << r << " col " << c;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(CApiDequantize, BitsandbytesNf4EqualsBnbBitForBit) {
  auto a = open_archive(converted("llama-nf4-dq"));
  ASSERT_TRUE(a);
  StFile ref(kFix + "refs/llama-nf4-dq.dequant.bnb.safetensors");
  int checked = 0;
  for (const auto& [name, rt] : ref.tensors()) {
    iris_tensor_info info;
    const auto got = dequant_bf16(a.get(), name, &info);
    ASSERT_EQ(info.format, IRIS_FORMAT_NF4);
    ASSERT_EQ(got, rt.as<uint16_t>()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(CApiDequantize, Fp8BlockEqualsTorchBitForBit) {
  auto a = open_archive(converted("llama-fp8-block"));
  ASSERT_TRUE(a);
  StFile ref(kFix + "refs/llama-fp8-block.dequant.torch.safetensors");
  int checked = 0;
  for (const auto& [name, rt] : ref.tensors()) {
    uint64_t i = 0;
    ASSERT_EQ(iris_archive_find_tensor(a.get(), name.c_str(), &i, nullptr, 0), IRIS_OK);
    iris_tensor_info info;
    ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
    ASSERT_EQ(info.format, IRIS_FORMAT_FP8_E4M3);
    std::vector<float> got(info.numel);
    ASSERT_EQ(iris_dequantize(a.get(), i, IRIS_DTYPE_F32, got.data(), got.size() * 4, 0, nullptr, 0), IRIS_OK);
    const auto want = rt.as<float>();
    ASSERT_EQ(want.size(), got.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

// Every tensor of every fixture and of every requantization of llama-bf16, in all three
// output types, equals what `iris export --dtype` writes; and any row range is the slice.
struct ExportCase {
  std::string fixture, options;
};

class CApiMatchesExport : public ::testing::TestWithParam<ExportCase> {};

TEST_P(CApiMatchesExport, EveryTensorEveryDtypeAndRowRanges) {
  const auto& c = GetParam();
  const std::string& path = converted(c.fixture, c.options);
  auto a = open_archive(path);
  ASSERT_TRUE(a);
  testing_files::TempDir dir;
  std::mt19937 rng(12345);
  struct Out {
    const char* name;
    iris_dtype dtype;
    uint32_t bytes;
  };
  for (Out o : {Out{"f32", IRIS_DTYPE_F32, 4}, Out{"bf16", IRIS_DTYPE_BF16, 2}, Out{"f16", IRIS_DTYPE_F16, 2}}) {
    const std::string st = dir / (std::string(o.name) + ".safetensors");
    auto r = testing_cli::run("export " + path + " -o " + st + " --dtype " + o.name + " -q");
    ASSERT_EQ(r.rc, 0) << r.out;
    StFile exported(st);
    for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
      iris_tensor_info info;
      ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
      const auto& want = exported.at(info.name);
      const bool is_float = info.dtype == IRIS_DTYPE_F32 || info.dtype == IRIS_DTYPE_BF16 || info.dtype == IRIS_DTYPE_F16;
      std::vector<uint8_t> got(info.numel * o.bytes);
      char msg[512];
      iris_status s = iris_dequantize(a.get(), i, o.dtype, got.data(), got.size(), 0, msg, sizeof msg);
      if (!is_float) {
        EXPECT_EQ(s, IRIS_ERR_UNSUPPORTED) << info.name;
        continue;
      }
      ASSERT_EQ(s, IRIS_OK) << msg;
      ASSERT_EQ(want.bytes, got.size()) << info.name;
      ASSERT_EQ(std::memcmp(got.data(), want.data, got.size()), 0) << info.name << " as " << o.name;
      // Three random row ranges (and the empty one) are slices of the whole.
      const uint64_t k = info.rows ? info.numel / info.rows : 0;
      for (int t = 0; t < 4 && info.rows; ++t) {
        uint64_t r0 = rng() % info.rows, r1 = r0 + rng() % (info.rows - r0 + 1);
        if (t == 3) r1 = r0;
        std::vector<uint8_t> part((r1 - r0) * k * o.bytes + 1);
        ASSERT_EQ(iris_dequantize_rows(a.get(), i, r0, r1, o.dtype, part.data(), part.size(), 1, msg, sizeof msg), IRIS_OK) << msg;
        ASSERT_EQ(std::memcmp(part.data(), got.data() + r0 * k * o.bytes, (r1 - r0) * k * o.bytes), 0)
            << info.name << " rows [" << r0 << ", " << r1 << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CApiMatchesExport,
                         ::testing::Values(ExportCase{"gptoss-mxfp4", ""}, ExportCase{"llama-nf4-dq", ""},
                                           ExportCase{"llama-fp8-block", ""}, ExportCase{"llama-bf16", "--quant mxfp4"},
                                           ExportCase{"llama-bf16", "--quant nf4"}, ExportCase{"llama-bf16", "--quant fp8-channel"},
                                           ExportCase{"llama-bf16", "--quant fp8 --tile-n 8 --tile-k 64"},
                                           ExportCase{"llama-bf16", "--quant fp8-block"}),
                         [](const ::testing::TestParamInfo<ExportCase>& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace iris::capi_test
