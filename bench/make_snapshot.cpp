// Writes a synthetic snapshot (shards + index + config.json) with the project's own
// safetensors writer: the input of the conversion benchmarks.
//
//   iris_make_snapshot OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]   Llama-shaped, BF16
//   iris_make_snapshot OUT_DIR --gpt-oss-20b [SHARD_GB=5]   gpt-oss-20b-shaped, its experts in the
//       checkpoint's MXFP4 layout (U8 *_blocks [E, N, K/32, 16] + E8M0 *_scales [E, N, K/32]),
//       everything else BF16: 24 layers, 32 experts, hidden 2880, about 13.8 GB
//
// Weights are N(0, 0.02)-like (a fast hash-based generator, not zeros: zeros would make every
// codec look faster than real data does).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/float_bits.h"
#include "converter/hf/safetensors_writer.h"

namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// `bytes` bytes written 1 MiB at a time, each chunk filled by fill(dst, count, state) from a
// splitmix state seeded with `seed` (chunks are whole multiples of 8 bytes but the last).
template <typename Fill>
iris::ComponentProducer generated(uint64_t bytes, uint64_t seed, Fill fill) {
  return [bytes, seed, fill](iris::ByteSink& sink) -> iris::Status {
    uint64_t s = seed;
    std::vector<uint8_t> buf(1 << 20);
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t m = std::min<uint64_t>(buf.size(), bytes - done);
      fill(buf.data(), m, s);
      IRIS_TRY(sink.write({buf.data(), m}));
      done += m;
    }
    return iris::Status::ok();
  };
}

// BF16 weights: four per splitmix draw, the sum of two uniform bytes (a triangle) scaled to a
// std of about 0.02, with a rare 20x outlier.
iris::ComponentProducer random_bf16(uint64_t numel, uint64_t seed) {
  return generated(numel * 2, seed, [](uint8_t* dst, uint64_t m, uint64_t& s) {
    auto* out = reinterpret_cast<uint16_t*>(dst);
    const uint64_t n = m / 2;
    for (uint64_t i = 0; i < n; i += 4) {
      const uint64_t r = splitmix(s);
      for (int j = 0; j < 4 && i + j < n; ++j) {
        const int a = int((r >> (16 * j)) & 0xff), b = int((r >> (16 * j + 8)) & 0xff);
        float v = (float(a + b) - 255.0f) * (0.02f / 104.0f);
        if (((r >> (16 * j)) & 0x3ff) == 7) v *= 20.0f;
        out[i + j] = iris::f32_to_bf16(v);
      }
    }
  });
}

// Uniform random bytes: MXFP4 codes (every E2M1 pair equally likely).
iris::ComponentProducer random_bytes(uint64_t n, uint64_t seed) {
  return generated(n, seed, [](uint8_t* dst, uint64_t m, uint64_t& s) {
    for (uint64_t i = 0; i < m; i += 8) {
      const uint64_t w = splitmix(s);
      std::memcpy(dst + i, &w, std::min<uint64_t>(8, m - i));
    }
  });
}

// E8M0 scales around 2^-6 (bytes 118..125), what N(0, 0.02) weights get under the OCP rule.
iris::ComponentProducer random_e8m0(uint64_t n, uint64_t seed) {
  return generated(n, seed, [](uint8_t* dst, uint64_t m, uint64_t& s) {
    for (uint64_t i = 0; i < m; ++i) dst[i] = uint8_t(118 + splitmix(s) % 8);
  });
}

struct Tensor {
  std::string name;
  iris::DType dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes;
  iris::ComponentProducer produce;
};

// The tensors of a snapshot in file order, each with its own generator seed.
struct TensorList {
  std::vector<Tensor> all;
  uint64_t seed = 1;
  void bf16(const std::string& name, std::vector<uint64_t> shape) {
    uint64_t n = 1;
    for (auto d : shape) n *= d;
    all.push_back({name, iris::DType::kBF16, shape, n * 2, random_bf16(n, seed++)});
  }
  void u8(const std::string& name, std::vector<uint64_t> shape, iris::ComponentProducer (*random)(uint64_t, uint64_t)) {
    uint64_t n = 1;
    for (auto d : shape) n *= d;
    all.push_back({name, iris::DType::kU8, shape, n, random(n, seed++)});
  }
};

// Shards of at most shard_gb, the index and config.json; returns the exit code.
int write_snapshot(const std::string& out, std::vector<Tensor> all, double shard_gb, const nlohmann::json& config) {
  nlohmann::json weight_map;
  std::vector<std::vector<iris::SafetensorsEntry>> shards(1);
  uint64_t shard_bytes = 0, total = 0;
  for (auto& t : all) {
    if (shard_bytes > 0 && shard_bytes + t.bytes > shard_gb * 1e9) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back({t.name, t.dtype, t.shape, std::move(t.produce)});
    shard_bytes += t.bytes;
    total += t.bytes;
  }
  const size_t k = shards.size();
  for (size_t i = 0; i < k; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, k);
    for (const auto& e : shards[i]) weight_map[e.name] = name;
    iris::SafetensorsWriteOptions o;
    o.overwrite = true;
    auto s = iris::write_safetensors(out + "/" + name, std::move(shards[i]), o);
    if (!s.is_ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
  }
  std::ofstream(out + "/model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2);
  std::ofstream(out + "/config.json") << config.dump(2);
  std::printf("%s: %zu tensors, %zu shards, %.2f GB\n", out.c_str(), all.size(), k, total / 1e9);
  return 0;
}

// gpt-oss-20b's shapes (its config.json), experts as the checkpoint stores them.
int make_gpt_oss_20b(const std::string& out, double shard_gb) {
  const uint64_t hidden = 2880, inter = 2880, experts = 32, vocab = 201088, heads = 64, kv = 8, hd = 64, layers = 24;
  TensorList list;
  auto bf16 = [&](const std::string& name, std::vector<uint64_t> shape) { list.bf16(name, std::move(shape)); };
  auto mxfp4 = [&](const std::string& name, uint64_t n, uint64_t k) {
    list.u8(name + "_blocks", {experts, n, k / 32, 16}, random_bytes);
    list.u8(name + "_scales", {experts, n, k / 32}, random_e8m0);
  };
  bf16("model.embed_tokens.weight", {vocab, hidden});
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    bf16(p + "input_layernorm.weight", {hidden});
    bf16(p + "post_attention_layernorm.weight", {hidden});
    bf16(p + "self_attn.q_proj.weight", {heads * hd, hidden});
    bf16(p + "self_attn.q_proj.bias", {heads * hd});
    bf16(p + "self_attn.k_proj.weight", {kv * hd, hidden});
    bf16(p + "self_attn.k_proj.bias", {kv * hd});
    bf16(p + "self_attn.v_proj.weight", {kv * hd, hidden});
    bf16(p + "self_attn.v_proj.bias", {kv * hd});
    bf16(p + "self_attn.o_proj.weight", {hidden, heads * hd});
    bf16(p + "self_attn.o_proj.bias", {hidden});
    bf16(p + "self_attn.sinks", {heads});
    bf16(p + "mlp.router.weight", {experts, hidden});
    bf16(p + "mlp.router.bias", {experts});
    mxfp4(p + "mlp.experts.gate_up_proj", 2 * inter, hidden);
    bf16(p + "mlp.experts.gate_up_proj_bias", {experts, 2 * inter});
    mxfp4(p + "mlp.experts.down_proj", hidden, inter);
    bf16(p + "mlp.experts.down_proj_bias", {experts, hidden});
  }
  bf16("model.norm.weight", {hidden});
  bf16("lm_head.weight", {vocab, hidden});
  const nlohmann::json config = {
      {"model_type", "gpt_oss"}, {"architectures", {"GptOssForCausalLM"}}, {"hidden_size", hidden}, {"intermediate_size", inter},
      {"num_hidden_layers", layers}, {"num_local_experts", experts}, {"num_experts_per_tok", 4}, {"num_attention_heads", heads},
      {"num_key_value_heads", kv}, {"head_dim", hd}, {"vocab_size", vocab}, {"attention_bias", true}, {"torch_dtype", "bfloat16"},
      {"quantization_config",
       {{"quant_method", "mxfp4"},
        {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}}}};
  return write_snapshot(out, std::move(list.all), shard_gb, config);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]\n       %s OUT_DIR --gpt-oss-20b [SHARD_GB=5]\n", argv[0], argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  if (argc > 2 && std::string(argv[2]) == "--gpt-oss-20b") {
    std::filesystem::create_directories(out);
    return make_gpt_oss_20b(out, argc > 3 ? std::atof(argv[3]) : 5.0);
  }
  const double total_gb = argc > 2 ? std::atof(argv[2]) : 2.0;
  const double shard_gb = argc > 3 ? std::atof(argv[3]) : 1.0;
  const uint64_t hidden = 4096, inter = 14336, vocab = 32000;
  const uint64_t per_layer = 2 * (hidden * hidden * 2 + hidden * 1024 * 2 + 3 * hidden * inter);
  const uint64_t embed = 2 * vocab * hidden * 2;
  int layers = std::max(1, int((total_gb * 1e9 - embed) / per_layer));
  std::filesystem::create_directories(out);

  TensorList list;
  auto bf16 = [&](const std::string& name, std::vector<uint64_t> shape) { list.bf16(name, std::move(shape)); };
  bf16("model.embed_tokens.weight", {vocab, hidden});
  for (int l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (auto& [n, s] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"self_attn.q_proj.weight", {hidden, hidden}}, {"self_attn.k_proj.weight", {1024, hidden}},
             {"self_attn.v_proj.weight", {1024, hidden}}, {"self_attn.o_proj.weight", {hidden, hidden}},
             {"mlp.gate_proj.weight", {inter, hidden}}, {"mlp.up_proj.weight", {inter, hidden}},
             {"mlp.down_proj.weight", {hidden, inter}}, {"input_layernorm.weight", {hidden}},
             {"post_attention_layernorm.weight", {hidden}}})
      bf16(p + n, s);
  }
  bf16("model.norm.weight", {hidden});
  bf16("lm_head.weight", {vocab, hidden});
  return write_snapshot(out, std::move(list.all), shard_gb,
                        nlohmann::json{{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", hidden},
                                       {"intermediate_size", inter}, {"num_hidden_layers", layers}, {"vocab_size", vocab},
                                       {"torch_dtype", "bfloat16"}});
}
