// The decoders of quant/ against outputs the reference tools produced
// (tests/data/fixtures/refs): transformers for gpt-oss MXFP4, bitsandbytes for NF4 double
// quant, torch for FP8 blocks. Every element of every tensor must match bit for bit, for
// the oracle (*_ref) and the fast decoders (FP32 output rounded, and BF16 output directly).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/float_bits.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"
#include "tests/quant/st_reader.h"

namespace iris::quant {
namespace {

using test::kFixtures;
using test::StFile;
using test::StSnapshot;

// "" if got == want element for element, else the first mismatch described with `where(i)`.
template <typename T, typename Where>
std::string compare(const std::vector<T>& got, const std::vector<T>& want, Where where) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::ostringstream s;
      s << "first mismatch at " << where(i) << ": got 0x" << std::hex << uint64_t(got[i]) << ", want 0x" << uint64_t(want[i]);
      return s.str();
    }
  return "";
}

std::vector<uint16_t> round_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

TEST(DecodeFixtures, GptOssMxfp4MatchesTransformersBitForBit) {
  StSnapshot src(kFixtures + "gptoss-mxfp4");
  StFile ref(kFixtures + "refs/gptoss-mxfp4.dequant.transformers.safetensors");
  int checked = 0;
  for (int layer = 0; layer < 2; ++layer)
    for (std::string proj : {"gate_up_proj", "down_proj"}) {
      const std::string base = "model.layers." + std::to_string(layer) + ".mlp.experts." + proj;
      const auto& blocks = src.at(base + "_blocks");
      const auto& scales = src.at(base + "_scales");
      const uint64_t e = blocks.shape[0], n = blocks.shape[1], k = blocks.shape[2] * 32;
      ASSERT_EQ(scales.shape, (std::vector<uint64_t>{e, n, k / 32}));
      const auto& rt = ref.at(base);
      ASSERT_EQ(rt.dtype, "BF16");
      ASSERT_EQ(rt.shape, (std::vector<uint64_t>{e, k, n}));  // transformers holds [E, K, N]
      // Our output is [E, N, K]; the reference transposed back to it.
      const auto ref_ekn = rt.as<uint16_t>();
      std::vector<uint16_t> want(e * n * k);
      for (uint64_t x = 0; x < e; ++x)
        for (uint64_t r = 0; r < n; ++r)
          for (uint64_t c = 0; c < k; ++c) want[(x * n + r) * k + c] = ref_ekn[(x * k + c) * n + r];
      auto where = [&](size_t i) {
        return base + " expert " + std::to_string(i / (n * k)) + " row " + std::to_string(i / k % n) + " col " + std::to_string(i % k);
      };
      std::vector<float> out(e * n * k);
      std::vector<uint16_t> out16(e * n * k);
      mxfp4_decode_ref(blocks.data, scales.data, e * n, k, out.data());
      EXPECT_EQ(compare(round_bf16(out), want, where), "") << "mxfp4_decode_ref";
      mxfp4_decode(blocks.data, scales.data, e * n, k, out.data());
      EXPECT_EQ(compare(round_bf16(out), want, where), "") << "mxfp4_decode";
      mxfp4_decode_bf16(blocks.data, scales.data, e * n, k, out16.data());
      EXPECT_EQ(compare(out16, want, where), "") << "mxfp4_decode_bf16";
      ++checked;
    }
  EXPECT_EQ(checked, 4);
}

TEST(DecodeFixtures, BitsandbytesNf4DoubleQuantMatchesBnbBitForBit) {
  StFile src(kFixtures + "llama-nf4-dq/model.safetensors");
  StFile ref(kFixtures + "refs/llama-nf4-dq.dequant.bnb.safetensors");
  int checked = 0;
  for (const auto& [w, rt] : ref.tensors()) {
    const auto& qs = src.at(w + ".quant_state.bitsandbytes__nf4");
    const auto state = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(qs.data), qs.bytes));
    ASSERT_EQ(state.at("quant_type"), "nf4");
    ASSERT_EQ(state.at("shape").get<std::vector<uint64_t>>(), rt.shape) << w;
    const auto code_table = src.at(w + ".quant_map").as<float>();
    const auto nested_absmax = src.at(w + ".nested_absmax").as<float>();
    const auto nested_map = src.at(w + ".nested_quant_map").as<float>();
    Bnb4bitParams p;
    p.block_size = state.at("blocksize").get<uint64_t>();
    p.code_table = code_table.data();
    p.double_quant = true;
    p.absmax_codes = src.at(w + ".absmax").data;
    p.nested_absmax = nested_absmax.data();
    p.nested_map = nested_map.data();
    p.nested_block_size = state.at("nested_blocksize").get<uint64_t>();
    p.nested_offset = float(state.at("nested_offset").get<double>());  // FP32 printed as a double
    const uint64_t n = rt.numel(), k = rt.shape[1];
    const uint8_t* codes = src.at(w).data;
    const auto want = rt.as<uint16_t>();
    auto where = [&, wn = w](size_t i) { return wn + " element " + std::to_string(i) + " (row " + std::to_string(i / k) + ", col " + std::to_string(i % k) + ")"; };
    std::vector<float> out(n);
    std::vector<uint16_t> out16(n);
    bnb4_decode_ref(codes, 0, n, p, out.data());
    EXPECT_EQ(compare(round_bf16(out), want, where), "") << "bnb4_decode_ref";
    bnb4_decode(codes, n, p, out.data());
    EXPECT_EQ(compare(round_bf16(out), want, where), "") << "bnb4_decode";
    bnb4_decode_bf16(codes, n, p, out16.data());
    EXPECT_EQ(compare(out16, want, where), "") << "bnb4_decode_bf16";
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(DecodeFixtures, Fp8BlockMatchesTorchBitForBit) {
  StFile src(kFixtures + "llama-fp8-block/model.safetensors");
  StFile ref(kFixtures + "refs/llama-fp8-block.dequant.torch.safetensors");
  int checked = 0;
  for (const auto& [w, rt] : ref.tensors()) {
    ASSERT_EQ(rt.dtype, "F32");
    const uint64_t n = rt.shape[0], k = rt.shape[1];
    const auto& q = src.at(w);
    ASSERT_EQ(q.dtype, "F8_E4M3");
    const auto scales = src.at(w + "_scale_inv").as<float>();
    ASSERT_EQ(scales.size(), ((n + 127) / 128) * ((k + 127) / 128));
    Fp8Scales s;
    s.granularity = Fp8Granularity::kBlock;
    s.data = scales.data();
    const auto want = bits(rt.as_f32());
    auto where = [&, wn = w](size_t i) { return wn + " row " + std::to_string(i / k) + " col " + std::to_string(i % k); };
    std::vector<float> out(n * k);
    fp8_decode_ref(q.data, 1, n, k, s, out.data());
    EXPECT_EQ(compare(bits(out), want, where), "") << "fp8_decode_ref";
    fp8_decode(q.data, 1, n, k, s, out.data());
    EXPECT_EQ(compare(bits(out), want, where), "") << "fp8_decode";
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

}  // namespace
}  // namespace iris::quant
