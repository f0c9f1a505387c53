// The decoders of quant/ against outputs the reference tools produced (tests/data/fixtures/refs):
// transformers for gpt-oss MXFP4, bitsandbytes for NF4 double quant, torch for FP8 blocks.
// Every element of every tensor must match bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/float_bits.h"
#include "formats/safetensors_file.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "quant/tables.h"

namespace iris {
namespace {

const std::string kFix = std::string(IRIS_TEST_DATA_DIR) + "/fixtures/";

SafetensorsFile open_st(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return std::move(f).value();
}

template <typename T>
const T* data_of(const SafetensorsFile& f, const std::string& name) {
  const auto* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? reinterpret_cast<const T*>(f.data(*t).data()) : nullptr;
}

TEST(DecodeFixtures, GptOssMxfp4MatchesTransformersBitForBit) {
  auto s1 = open_st(kFix + "gptoss-mxfp4/model-00001-of-00002.safetensors");
  auto s2 = open_st(kFix + "gptoss-mxfp4/model-00002-of-00002.safetensors");
  auto ref = open_st(kFix + "refs/gptoss-mxfp4.dequant.transformers.safetensors");
  int checked = 0;
  for (int layer = 0; layer < 2; ++layer)
    for (std::string proj : {"gate_up_proj", "down_proj"}) {
      const std::string base = "model.layers." + std::to_string(layer) + ".mlp.experts." + proj;
      const SafetensorsFile& src = s1.find(base + "_blocks") ? s1 : s2;
      const auto* blocks = src.find(base + "_blocks");
      ASSERT_NE(blocks, nullptr);
      const uint64_t e = blocks->shape[0], n = blocks->shape[1], k = blocks->shape[2] * 32;
      std::vector<float> out(e * n * k);
      quant::mxfp4_decode(data_of<uint8_t>(src, base + "_blocks"), data_of<uint8_t>(src, base + "_scales"), e * n, k, out.data());
      const auto* rt = ref.find(base);
      ASSERT_NE(rt, nullptr);
      ASSERT_EQ(rt->shape, (std::vector<uint64_t>{e, k, n}));  // transformers holds [E, K, N]
      const uint16_t* want = reinterpret_cast<const uint16_t*>(ref.data(*rt).data());
      for (uint64_t x = 0; x < e; ++x)
        for (uint64_t r = 0; r < n; ++r)
          for (uint64_t c = 0; c < k; ++c) {
            const uint16_t got = f32_to_bf16(out[(x * n + r) * k + c]), w = want[(x * k + c) * n + r];
            if (got != w) FAIL() << base << " expert " << x << " row " << r << " col " << c << ": " << std::hex << got << " != " << w;
          }
      ++checked;
    }
  EXPECT_EQ(checked, 4);
}

TEST(DecodeFixtures, BitsandbytesNf4DoubleQuantMatchesBnbBitForBit) {
  auto src = open_st(kFix + "llama-nf4-dq/model.safetensors");
  auto ref = open_st(kFix + "refs/llama-nf4-dq.dequant.bnb.safetensors");
  int checked = 0;
  for (const auto& rt : ref.tensors()) {
    const std::string w = rt.name;
    const auto* qs = src.find(w + ".quant_state.bitsandbytes__nf4");
    ASSERT_NE(qs, nullptr) << w;
    auto bytes = src.data(*qs);
    auto state = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    quant::Bnb4bitParams p;
    p.block_size = state["blocksize"].get<uint64_t>();
    p.code_table = data_of<float>(src, w + ".quant_map");
    p.double_quant = true;
    p.absmax_codes = data_of<uint8_t>(src, w + ".absmax");
    p.nested_absmax = data_of<float>(src, w + ".nested_absmax");
    p.nested_map = data_of<float>(src, w + ".nested_quant_map");
    p.nested_block_size = state["nested_blocksize"].get<uint64_t>();
    p.nested_offset = float(state["nested_offset"].get<double>());
    const uint64_t n = rt.numel;
    ASSERT_EQ(state["shape"].get<std::vector<uint64_t>>(), rt.shape);
    std::vector<float> out(n);
    quant::bnb4_decode(data_of<uint8_t>(src, w), n, p, out.data());
    const uint16_t* want = reinterpret_cast<const uint16_t*>(ref.data(rt).data());
    for (uint64_t i = 0; i < n; ++i)
      if (f32_to_bf16(out[i]) != want[i])
        FAIL() << w << " element " << i << " (row " << i / rt.shape[1] << ", col " << i % rt.shape[1] << "): " << std::hex
               << f32_to_bf16(out[i]) << " != " << want[i];
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(DecodeFixtures, Fp8BlockMatchesTorchBitForBit) {
  auto src = open_st(kFix + "llama-fp8-block/model.safetensors");
  auto ref = open_st(kFix + "refs/llama-fp8-block.dequant.torch.safetensors");
  int checked = 0;
  for (const auto& rt : ref.tensors()) {
    const uint64_t n = rt.shape[0], k = rt.shape[1];
    quant::Fp8Scales s;
    s.granularity = quant::Fp8Granularity::kBlock;
    s.data = data_of<float>(src, rt.name + "_scale_inv");
    std::vector<float> out(n * k);
    quant::fp8_decode(data_of<uint8_t>(src, rt.name), 1, n, k, s, out.data());
    const float* want = reinterpret_cast<const float*>(ref.data(rt).data());
    for (uint64_t i = 0; i < n * k; ++i)
      if (std::memcmp(&out[i], &want[i], 4) != 0) FAIL() << rt.name << " element " << i << ": " << out[i] << " != " << want[i];
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(Tables, DynamicMapAndNf4TableEqualTheFixtureBytes) {
  auto src = open_st(kFix + "llama-nf4-dq/model.safetensors");
  const float* nested = data_of<float>(src, "model.layers.0.mlp.down_proj.weight.nested_quant_map");
  const float* nf4 = data_of<float>(src, "model.layers.0.mlp.down_proj.weight.quant_map");
  for (int i = 0; i < 256; ++i) EXPECT_EQ(f32_bits(quant::dynamic_map_value(uint8_t(i))), f32_bits(nested[i])) << i;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(f32_bits(quant::nf4_to_f32(uint8_t(i))), f32_bits(nf4[i])) << i;
}

TEST(Tables, ElementDecodersFollowTheirDefinitions) {
  const float e2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};  // OCP MX v1.0 table 1
  for (int c = 0; c < 16; ++c) {
    float want = (c & 8) ? -e2m1[c & 7] : e2m1[c & 7];
    EXPECT_EQ(f32_bits(quant::e2m1_to_f32(uint8_t(c))), f32_bits(want)) << c;
  }
  for (int e = 0; e < 255; ++e) EXPECT_EQ(quant::e8m0_to_f32(uint8_t(e)), std::ldexp(1.0f, e - 127)) << e;
  EXPECT_TRUE(std::isnan(quant::e8m0_to_f32(0xff)));
  for (int b = 0; b < 256; ++b) {
    const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    const float v = quant::e4m3_to_f32(uint8_t(b));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(v)) << b;
      continue;
    }
    float want = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
    EXPECT_EQ(f32_bits(v), f32_bits(s ? -want : want)) << b;
  }
  EXPECT_EQ(quant::e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(quant::e4m3_to_f32(0x01), std::ldexp(1.f, -9));
}

}  // namespace
}  // namespace iris
