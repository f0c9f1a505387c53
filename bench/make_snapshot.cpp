// Writes a synthetic snapshot (shards + index + config.json) with the project's own
// safetensors writer: the input of the conversion benchmarks.
//
//   iris_make_snapshot OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]   Llama-shaped, BF16
//   iris_make_snapshot OUT_DIR --gpt-oss-20b [SHARD_GB=5]   gpt-oss-20b-shaped, its experts in the
//       checkpoint's MXFP4 layout (U8 *_blocks [E, N, K/32, 16] + E8M0 *_scales [E, N, K/32]),
//       everything else BF16: 24 layers, 32 experts, hidden 2880, about 13.8 GB
//   iris_make_snapshot OUT_DIR --config CONFIG.json [SHARD_GB=5]   every tensor a Hugging Face
//       config of model_type llama, mistral, qwen2, mixtral or gpt_oss names, at its shapes
//       (gpt_oss: experts in MXFP4 as shipped), RMSNorm weights 1, the config copied: the models of
//       bench/decode_bench.py
//   iris_make_snapshot OUT.iris --config CONFIG.json --archive [--quant mxfp4|nf4]   the same
//       model written straight into an archive, as `iris convert [--quant]` would write the
//       snapshot (no snapshot on disk)
//
// Weights are N(0, 0.02)-like (a fast hash-based generator, not zeros: zeros would make every
// codec look faster than real data does).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/float_bits.h"
#include "common/parallel_for.h"
#include "converter/sources/safetensors_writer.h"
#include "formats/iris_writer.h"
#include "formats/tensor_desc.h"
#include "formats/tile_layout.h"
#include "quant/tables.h"

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

// BF16 ones: RMSNorm weights as trained models have them near (random ones would scale every
// layer's input by ~0.02).
iris::ComponentProducer ones_bf16(uint64_t numel) {
  return generated(numel * 2, 0, [](uint8_t* dst, uint64_t m, uint64_t&) {
    auto* out = reinterpret_cast<uint16_t*>(dst);
    for (uint64_t i = 0; i < m / 2; ++i) out[i] = 0x3F80;
  });
}

// E8M0 scales of bytes 119..121 (2^-8 .. 2^-6): the OCP rule's pick for blocks of N(0, 0.02)
// weights (a block's largest of 32 draws is about 0.045 -> floor(log2) = -5, minus E2M1's
// emax 2 -> 2^-7), so the MXFP4 experts of a --config model are about as large as its BF16
// weights. (random_e8m0's wider 118..125 gives some blocks 2^-2: weights up to 1.5, which
// makes a deep random model chaotic: rounding differences then grow layer by layer.)
iris::ComponentProducer trained_like_e8m0(uint64_t n, uint64_t seed) {
  return generated(n, seed, [](uint8_t* dst, uint64_t m, uint64_t& s) {
    for (uint64_t i = 0; i < m; ++i) dst[i] = uint8_t(119 + splitmix(s) % 3);
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
  void ones(const std::string& name, uint64_t n) { all.push_back({name, iris::DType::kBF16, {n}, n * 2, ones_bf16(n)}); }
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

uint64_t config_uint(const nlohmann::json& c, const char* key, uint64_t fallback) {
  const auto it = c.find(key);
  return it != c.end() && it->is_number_unsigned() ? it->get<uint64_t>() : fallback;
}

// What a model of a config holds, tensor by tensor, in checkpoint order: BF16 weights, RMSNorm
// weights (ones), and gpt-oss's MXFP4 expert stacks [E, N, K] as shipped.
struct ModelTensors {
  std::function<void(const std::string&, std::vector<uint64_t>)> bf16;
  // A linear layer's [N, K] weight: what `iris convert --quant` quantizes (embeddings, lm_head,
  // routers and norms are not).
  std::function<void(const std::string&, uint64_t, uint64_t)> linear;
  std::function<void(const std::string&, uint64_t)> ones;
  std::function<void(const std::string&, uint64_t, uint64_t, uint64_t)> mxfp4;  // name, E, N, K
};

// Reads and checks the config; enumerates its model's tensors into `m`. Returns 0, or the
// exit code after printing why.
int enumerate_model(const std::string& config_path, nlohmann::json& c, const ModelTensors& m) {
  try {
    std::ifstream f(config_path);
    if (!f) {
      std::fprintf(stderr, "%s: cannot read\n", config_path.c_str());
      return 5;
    }
    c = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: not JSON: %s\n", config_path.c_str(), e.what());
    return 3;
  }
  const std::string type = c.value("model_type", "");
  const uint64_t hidden = config_uint(c, "hidden_size", 0), inter = config_uint(c, "intermediate_size", 0);
  const uint64_t layers = config_uint(c, "num_hidden_layers", 0), vocab = config_uint(c, "vocab_size", 0);
  const uint64_t heads = config_uint(c, "num_attention_heads", 0), kv = config_uint(c, "num_key_value_heads", heads);
  const uint64_t hd = config_uint(c, "head_dim", heads ? hidden / heads : 0);
  if (!hidden || !inter || !layers || !vocab || !heads || !kv || !hd) {
    std::fprintf(stderr, "%s: hidden_size, intermediate_size, num_hidden_layers, vocab_size and num_attention_heads must be positive integers\n",
                 config_path.c_str());
    return 3;
  }
  const bool gpt_oss = type == "gpt_oss", mixtral = type == "mixtral";
  if (!gpt_oss && !mixtral && type != "llama" && type != "mistral" && type != "qwen2") {
    std::fprintf(stderr, "%s: model_type '%s': not one of llama, mistral, qwen2, mixtral, gpt_oss\n", config_path.c_str(), type.c_str());
    return 7;
  }
  const uint64_t experts = config_uint(c, "num_local_experts", 0);
  if ((gpt_oss || mixtral) && !experts) {
    std::fprintf(stderr, "%s: num_local_experts must be a positive integer\n", config_path.c_str());
    return 3;
  }
  if (gpt_oss && (hidden % 32 || inter % 32)) {
    std::fprintf(stderr, "%s: gpt-oss's MXFP4 experts need hidden_size and intermediate_size multiples of 32\n", config_path.c_str());
    return 3;
  }
  const bool qkv_bias = gpt_oss || type == "qwen2" || c.value("attention_bias", false);
  const bool o_bias = gpt_oss || (type != "qwen2" && c.value("attention_bias", false));
  m.bf16("model.embed_tokens.weight", {vocab, hidden});
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m.ones(p + "input_layernorm.weight", hidden);
    m.ones(p + "post_attention_layernorm.weight", hidden);
    const std::pair<const char*, uint64_t> projections[] = {{"q", heads * hd}, {"k", kv * hd}, {"v", kv * hd}};
    for (const auto& [n, rows] : projections) {
      m.linear(p + "self_attn." + n + "_proj.weight", rows, hidden);
      if (qkv_bias) m.bf16(p + "self_attn." + n + "_proj.bias", {rows});
    }
    m.linear(p + "self_attn.o_proj.weight", hidden, heads * hd);
    if (o_bias) m.bf16(p + "self_attn.o_proj.bias", {hidden});
    if (gpt_oss) {
      m.bf16(p + "self_attn.sinks", {heads});
      m.bf16(p + "mlp.router.weight", {experts, hidden});
      m.bf16(p + "mlp.router.bias", {experts});
      m.mxfp4(p + "mlp.experts.gate_up_proj", experts, 2 * inter, hidden);
      m.bf16(p + "mlp.experts.gate_up_proj_bias", {experts, 2 * inter});
      m.mxfp4(p + "mlp.experts.down_proj", experts, hidden, inter);
      m.bf16(p + "mlp.experts.down_proj_bias", {experts, hidden});
    } else if (mixtral) {
      m.bf16(p + "block_sparse_moe.gate.weight", {experts, hidden});
      for (uint64_t x = 0; x < experts; ++x) {
        const std::string e = p + "block_sparse_moe.experts." + std::to_string(x) + ".";
        m.linear(e + "w1.weight", inter, hidden);
        m.linear(e + "w2.weight", hidden, inter);
        m.linear(e + "w3.weight", inter, hidden);
      }
    } else {
      m.linear(p + "mlp.gate_proj.weight", inter, hidden);
      m.linear(p + "mlp.up_proj.weight", inter, hidden);
      m.linear(p + "mlp.down_proj.weight", hidden, inter);
    }
  }
  m.ones("model.norm.weight", hidden);
  if (!c.value("tie_word_embeddings", false)) m.bf16("lm_head.weight", {vocab, hidden});
  return 0;
}

// A config's model as a snapshot folder (gpt-oss experts as the checkpoint stores them:
// U8 *_blocks [E, N, K/32, 16] + E8M0 *_scales [E, N, K/32]).
int make_from_config(const std::string& out, const std::string& config_path, double shard_gb) {
  TensorList list;
  ModelTensors m;
  m.bf16 = [&](const std::string& name, std::vector<uint64_t> shape) { list.bf16(name, std::move(shape)); };
  m.linear = [&](const std::string& name, uint64_t n, uint64_t k) { list.bf16(name, {n, k}); };
  m.ones = [&](const std::string& name, uint64_t n) { list.ones(name, n); };
  m.mxfp4 = [&](const std::string& name, uint64_t e, uint64_t n, uint64_t k) {
    list.u8(name + "_blocks", {e, n, k / 32, 16}, random_bytes);
    list.u8(name + "_scales", {e, n, k / 32}, trained_like_e8m0);
  };
  nlohmann::json c;
  if (int rc = enumerate_model(config_path, c, m)) return rc;
  return write_snapshot(out, std::move(list.all), shard_gb, c);
}

// Tiled 4-bit codes (formats/tensor_desc.h): random bytes inside the matrix, the format's pad
// byte (decoding to zero) in the padding, in the layout's order. Stripes are made on every
// CPU, 64 MiB at a time, each from its own splitmix stream (seed, stripe index), so the bytes do
// not depend on the thread count (gpt-oss-120b's 61 GB of codes took minutes on one thread).
iris::ComponentProducer random_tiled_codes(const iris::MatrixGeometry& g, uint64_t tile_n, uint64_t tile_k, uint64_t seed) {
  return [g, tile_n, tile_k, seed](iris::ByteSink& sink) -> iris::Status {
    const uint64_t row_bytes = tile_k * g.code_bits / 8, tiles = g.padded_k / tile_k;
    const uint64_t sb = iris::stripe_bytes(g, tile_n), per_matrix = g.padded_n / tile_n, total = g.batch * per_matrix;
    const uint64_t per_round = std::max<uint64_t>(1, (uint64_t(64) << 20) / sb);
    std::vector<uint8_t> buf(std::min(total, per_round) * sb);
    for (uint64_t s0 = 0; s0 < total; s0 += per_round) {
      const uint64_t count = std::min(per_round, total - s0);
      iris::parallel_for(int64_t(count), 1, [&](int64_t i) {
        const uint64_t r0 = (s0 + uint64_t(i)) % per_matrix * tile_n;
        uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ (s0 + uint64_t(i));
        uint8_t* p = buf.data() + uint64_t(i) * sb;
        for (uint64_t t = 0; t < tiles; ++t)
          for (uint64_t r = 0; r < tile_n; ++r, p += row_bytes) {
            const uint64_t col0 = t * tile_k;
            // Bytes holding a column inside the matrix: a 4-bit byte whose first column is.
            const uint64_t valid = r0 + r >= g.n || col0 >= g.k ? 0 : std::min(row_bytes, ((g.k - col0) * g.code_bits + 7) / 8);
            for (uint64_t j = 0; j < valid; j += 8) {
              const uint64_t w = splitmix(s);
              std::memcpy(p + j, &w, std::min<uint64_t>(8, valid - j));
            }
            std::memset(p + valid, g.pad_byte, row_bytes - valid);
          }
      });
      IRIS_TRY(sink.write({buf.data(), count * sb}));
    }
    return iris::Status::ok();
  };
}

// Bytes of one component of a descriptor (component_specs order), 0 where it has none.
uint64_t component_bytes(const iris::TensorDesc& d, size_t i) {
  auto specs = iris::component_specs(d);
  return specs.is_ok() && i < specs->size() ? (*specs)[i].bytes : 0;
}

// F32 values as bytes.
iris::ComponentProducer f32_values(std::vector<float> v) {
  return [v = std::move(v)](iris::ByteSink& sink) { return sink.write({reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}); };
}

// A linear weight [n, k] in NF4 with double quantization, as `iris convert --quant nf4` writes
// it (converter/pipeline/requantize.cpp): random codes (the pad byte 0x77, code 7 = 0.0, in the tiles'
// padding), random 8-bit absmax codes, nested absmax 0.02 and offset 0.0625 (so every block's
// absmax lies in 0.0425 .. 0.0825), bitsandbytes' tables and quant_state.
std::pair<iris::TensorDesc, std::vector<iris::ComponentProducer>> nf4_linear(const std::string& name, uint64_t n, uint64_t k,
                                                                             uint64_t seed) {
  const std::string state = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [" + std::to_string(n) +
                            ", " + std::to_string(k) + "], \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": 0.0625}";
  iris::TensorDesc d{name, {n, k}, iris::DType::kBF16, iris::Format::kNf4,
                     {{"block_size", 64}, {"double_quant", true}, {"nested_block_size", 256}, {"nested_offset", 0.0625},
                      {"nested_offset_f32_bits", "0x3d800000"}, {"nibble_order", "high_first"}, {"quant_state_bytes", state.size()}}, {}};
  d.layout = iris::choose_layout(d, iris::kDefaultTileN, iris::kDefaultTileK);
  std::vector<iris::ComponentProducer> p;
  auto g = iris::matrix_geometry(d);
  if (!g.is_ok()) return {d, p};
  std::vector<float> nested(component_bytes(d, 2) / 4, 0.02f), table(16), map(256);
  for (int i = 0; i < 16; ++i) table[i] = iris::quant::nf4_to_f32(uint8_t(i));
  for (int i = 0; i < 256; ++i) map[i] = iris::quant::dynamic_map_value(uint8_t(i));
  p.push_back(random_tiled_codes(*g, d.layout.tile_n, d.layout.tile_k, seed));
  p.push_back(random_bytes(component_bytes(d, 1), seed + 1));
  p.push_back(f32_values(std::move(nested)));
  p.push_back(f32_values(std::move(table)));
  p.push_back(f32_values(std::move(map)));
  p.push_back([state](iris::ByteSink& sink) { return sink.write({reinterpret_cast<const uint8_t*>(state.data()), state.size()}); });
  return {d, p};
}

// A config's model written straight into an .iris archive through the library's writer (no
// snapshot on disk: gpt-oss-120b's (about 65 GB by arithmetic) could not sit beside its archive
// on a 64 GiB disk, a BF16 Mixtral-8x7B's (about 93 GB) fits no disk here). As `iris convert [--quant QUANT]` would write
// the snapshot: BF16 raw, gpt-oss experts MXFP4 as shipped; with QUANT (mxfp4 or nf4) the
// linear layers' weights in it, random codes and scales. Returns the exit code.
int make_archive(const std::string& out, const std::string& config_path, const std::string& quant) {
  if (!quant.empty() && quant != "mxfp4" && quant != "nf4" && quant != "nvfp4") {
    std::fprintf(stderr, "--quant %s: the archive writer makes mxfp4, nf4 or nvfp4\n", quant.c_str());
    return 2;
  }
  iris::IrisWriter writer;
  uint64_t seed = 1;
  int bad = 0;
  const nlohmann::json source = {{"generated_by", "iris_make_snapshot"}};
  auto raw = [&](const std::string& name, std::vector<uint64_t> shape, iris::ComponentProducer produce) {
    iris::TensorDesc d{name, std::move(shape), iris::DType::kBF16, iris::Format::kRaw, nlohmann::json::object(), {}};
    writer.add_tensor(std::move(d), source, {std::move(produce)});
  };
  ModelTensors m;
  m.bf16 = [&](const std::string& name, std::vector<uint64_t> shape) {
    uint64_t n = 1;
    for (auto x : shape) n *= x;
    raw(name, std::move(shape), random_bf16(n, seed++));
  };
  m.ones = [&](const std::string& name, uint64_t n) { raw(name, {n}, ones_bf16(n)); };
  auto mxfp4 = [&](const std::string& name, std::vector<uint64_t> shape, bool requantized) {
    iris::TensorDesc d{name, std::move(shape), iris::DType::kBF16, iris::Format::kMxfp4,
                       {{"block_size", 32}, {"element", "e2m1"}, {"nibble_order", "low_first"}, {"scale_encoding", "e8m0"}}, {}};
    if (requantized) d.params["scale_rule"] = "ocp_floor";
    d.layout = iris::choose_layout(d, iris::kDefaultTileN, iris::kDefaultTileK);
    auto g = iris::matrix_geometry(d);
    auto specs = iris::component_specs(d);
    if (!g.is_ok() || !specs.is_ok() || specs->size() != 2) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), (g.is_ok() ? specs.status() : g.status()).message().c_str());
      bad = 3;
      return;
    }
    const uint64_t scale_bytes = (*specs)[1].bytes;
    writer.add_tensor(d, source, {random_tiled_codes(*g, d.layout.tile_n, d.layout.tile_k, seed), trained_like_e8m0(scale_bytes, seed + 1)});
    seed += 2;
  };
  m.mxfp4 = [&](const std::string& name, uint64_t e, uint64_t n, uint64_t k) { mxfp4(name, {e, n, k}, false); };
  // NVFP4 as `convert --quant nvfp4` writes it (ModelOpt's convention): random codes, E4M3 block
  // scales in [0.5, 2) and one FP32 tensor scale of 1/2688 (a weight amax of 1).
  auto nvfp4 = [&](const std::string& name, uint64_t n, uint64_t k) {
    iris::TensorDesc d{name, {n, k}, iris::DType::kBF16, iris::Format::kNvfp4,
                       {{"block_size", 16}, {"element", "e2m1"}, {"nibble_order", "low_first"}, {"scale_encoding", "e4m3"},
                        {"tensor_scale", "multiplies"}, {"negative_zero", false}, {"tensor_scale_shape", std::vector<uint64_t>{}},
                        {"scale_rule", "modelopt"}}, {}};
    d.layout = iris::choose_layout(d, iris::kDefaultTileN, iris::kDefaultTileK);
    auto g = iris::matrix_geometry(d);
    auto specs = iris::component_specs(d);
    if (!g.is_ok() || !specs.is_ok() || specs->size() != 3) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), (g.is_ok() ? specs.status() : g.status()).message().c_str());
      bad = 3;
      return;
    }
    const uint64_t scale_bytes = (*specs)[1].bytes, s0 = seed;
    iris::ComponentProducer scales = [scale_bytes, s0](iris::ByteSink& sink) {
      std::vector<uint8_t> b(scale_bytes);
      uint64_t z = s0 * 0x9e3779b97f4a7c15ull;
      for (auto& x : b) {
        z ^= z >> 29, z *= 0xbf58476d1ce4e5b9ull;
        x = uint8_t(0x30 + (z >> 60));  // E4M3 0x30..0x3F: 0.5 .. 1.875
      }
      return sink.write(b);
    };
    iris::ComponentProducer tensor_scale = [](iris::ByteSink& sink) {
      const float t = 1.0f / 2688.0f;
      return sink.write({reinterpret_cast<const uint8_t*>(&t), 4});
    };
    writer.add_tensor(d, source, {random_tiled_codes(*g, d.layout.tile_n, d.layout.tile_k, seed), std::move(scales), std::move(tensor_scale)});
    seed += 2;
  };
  m.linear = [&](const std::string& name, uint64_t n, uint64_t k) {
    if (quant == "mxfp4" && k % 32 == 0) return mxfp4(name, {n, k}, true);
    if (quant == "nvfp4" && k % 16 == 0) return nvfp4(name, n, k);
    if (quant == "nf4" && k % 64 == 0) {
      auto [d, producers] = nf4_linear(name, n, k, seed);
      seed += 2;
      if (producers.empty()) {
        std::fprintf(stderr, "%s: no NF4 layout\n", name.c_str());
        bad = 3;
        return;
      }
      return writer.add_tensor(std::move(d), source, std::move(producers));
    }
    m.bf16(name, {n, k});
  };
  nlohmann::json c;
  if (int rc = enumerate_model(config_path, c, m)) return rc;
  if (bad) return bad;
  writer.set_model_type(c.value("model_type", ""));
  writer.set_tool({{"name", "iris_make_snapshot"}});
  writer.set_provenance({{"source", {{"kind", "generated"}}}});
  writer.add_file("config.json", c.dump(2));
  iris::WriteOptions o;
  o.overwrite = true;
  auto r = writer.write(out, o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "%s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("%s: written from %s\n", out.c_str(), config_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]\n       %s OUT_DIR --gpt-oss-20b [SHARD_GB=5]\n       %s OUT_DIR --config CONFIG.json [SHARD_GB=5 | --archive [--quant mxfp4|nf4|nvfp4]]\n",
                 argv[0], argv[0], argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  if (out.empty() || out[0] == '-') {  // `--help` is not a folder to fill with gigabytes
    std::fprintf(stderr, "usage: %s OUT_DIR [TOTAL_GB=2] [SHARD_GB=1]\n       %s OUT_DIR --gpt-oss-20b [SHARD_GB=5]\n       %s OUT_DIR --config CONFIG.json [SHARD_GB=5 | --archive [--quant mxfp4|nf4|nvfp4]]\n",
                 argv[0], argv[0], argv[0]);
    return 2;
  }
  if (argc > 3 && std::string(argv[2]) == "--config") {
    if (argc > 4 && std::string(argv[4]) == "--archive") return make_archive(out, argv[3], argc > 6 && std::string(argv[5]) == "--quant" ? argv[6] : "");
    std::filesystem::create_directories(out);
    return make_from_config(out, argv[3], argc > 4 ? std::atof(argv[4]) : 5.0);
  }
  if (argc > 2 && std::string(argv[2]).rfind("--", 0) == 0 && std::string(argv[2]) != "--gpt-oss-20b") {
    std::fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[2]);
    return 2;
  }
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
