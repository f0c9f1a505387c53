// Writes a synthetic Llama-shaped BF16 snapshot (shards + index + config.json) with the
// project's own safetensors writer: the input of the conversion benchmarks.
//
//   iris_make_snapshot OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]
//
// Weights are N(0, 0.02)-like (a fast hash-based generator, not zeros: zeros would make every
// codec look faster than real data does).
#include <cstdio>
#include <cstdlib>
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

iris::ComponentProducer random_bf16(uint64_t numel, uint64_t seed) {
  return [numel, seed](iris::ByteSink& sink) -> iris::Status {
    uint64_t s = seed;
    std::vector<uint16_t> buf(1 << 20);
    for (uint64_t done = 0; done < numel;) {
      uint64_t n = std::min<uint64_t>(buf.size(), numel - done);
      for (uint64_t i = 0; i < n; i += 4) {
        uint64_t r = splitmix(s);
        for (int j = 0; j < 4 && i + j < n; ++j) {
          // Sum of two uniforms ~ triangular, scaled to std ~0.02; a rare 20x outlier.
          int a = int((r >> (16 * j)) & 0xff), b = int((r >> (16 * j + 8)) & 0xff);
          float v = (float(a + b) - 255.0f) * (0.02f / 104.0f);
          if (((r >> (16 * j)) & 0x3ff) == 7) v *= 20.0f;
          buf[i + j] = iris::f32_to_bf16(v);
        }
      }
      IRIS_TRY(sink.write({reinterpret_cast<const uint8_t*>(buf.data()), n * 2}));
      done += n;
    }
    return iris::Status::ok();
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const double total_gb = argc > 2 ? std::atof(argv[2]) : 2.0;
  const double shard_gb = argc > 3 ? std::atof(argv[3]) : 1.0;
  const uint64_t hidden = 4096, inter = 14336, vocab = 32000;
  const uint64_t per_layer = 2 * (hidden * hidden * 2 + hidden * 1024 * 2 + 3 * hidden * inter);
  const uint64_t embed = 2 * vocab * hidden * 2;
  int layers = std::max(1, int((total_gb * 1e9 - embed) / per_layer));
  std::filesystem::create_directories(out);

  struct T { std::string name; std::vector<uint64_t> shape; };
  std::vector<T> all = {{"model.embed_tokens.weight", {vocab, hidden}}};
  for (int l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (auto& [n, s] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"self_attn.q_proj.weight", {hidden, hidden}}, {"self_attn.k_proj.weight", {1024, hidden}},
             {"self_attn.v_proj.weight", {1024, hidden}}, {"self_attn.o_proj.weight", {hidden, hidden}},
             {"mlp.gate_proj.weight", {inter, hidden}}, {"mlp.up_proj.weight", {inter, hidden}},
             {"mlp.down_proj.weight", {hidden, inter}}, {"input_layernorm.weight", {hidden}},
             {"post_attention_layernorm.weight", {hidden}}})
      all.push_back({p + n, s});
  }
  all.push_back({"model.norm.weight", {hidden}});
  all.push_back({"lm_head.weight", {vocab, hidden}});

  nlohmann::json weight_map;
  std::vector<std::vector<iris::SafetensorsEntry>> shards(1);
  uint64_t shard_bytes = 0, total = 0, seed = 1;
  for (const auto& t : all) {
    uint64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    if (shard_bytes > 0 && shard_bytes + numel * 2 > shard_gb * 1e9) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back({t.name, iris::DType::kBF16, t.shape, random_bf16(numel, seed++)});
    shard_bytes += numel * 2;
    total += numel * 2;
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
  std::ofstream(out + "/config.json") << nlohmann::json{{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}},
                                                        {"hidden_size", hidden}, {"intermediate_size", inter},
                                                        {"num_hidden_layers", layers}, {"vocab_size", vocab},
                                                        {"torch_dtype", "bfloat16"}}.dump(2);
  std::printf("%s: %d layers, %zu shards, %.2f GB of BF16 tensors\n", out.c_str(), layers, k, total / 1e9);
  return 0;
}
