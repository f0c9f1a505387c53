#include "converter/sources/seed_names.h"

#include <regex>
#include <tuple>
#include <vector>

namespace iris {

namespace {

struct Top {
  const char* hf;
  const char* seed;
  V1DType dtype;
};
const Top kTop[] = {{"model.embed_tokens.weight", "embed", V1DType::kBF16},
                    {"model.norm.weight", "final_norm", V1DType::kF32},
                    {"lm_head.weight", "lm_head", V1DType::kBF16}};

// The seed's per-layer order (convert_to_iris.py collect_tensors): HF suffix, seed suffix, dtype.
const std::vector<std::tuple<std::string, std::string, V1DType>>& per_layer() {
  static const std::vector<std::tuple<std::string, std::string, V1DType>> t = {
      {"input_layernorm.weight", "norm_attn", V1DType::kF32},
      {"post_attention_layernorm.weight", "norm_moe", V1DType::kF32},
      {"self_attn.sinks", "sinks", V1DType::kF32},
      {"self_attn.q_proj.weight", "w_q", V1DType::kBF16},
      {"self_attn.q_proj.bias", "b_q", V1DType::kBF16},
      {"self_attn.k_proj.weight", "w_k", V1DType::kBF16},
      {"self_attn.k_proj.bias", "b_k", V1DType::kBF16},
      {"self_attn.v_proj.weight", "w_v", V1DType::kBF16},
      {"self_attn.v_proj.bias", "b_v", V1DType::kBF16},
      {"self_attn.o_proj.weight", "w_o", V1DType::kBF16},
      {"self_attn.o_proj.bias", "b_o", V1DType::kBF16},
      {"mlp.router.weight", "router_w", V1DType::kBF16},
      {"mlp.router.bias", "router_b", V1DType::kBF16},
      {"mlp.experts.gate_up_proj_bias", "gate_up_b", V1DType::kBF16},
      {"mlp.experts.down_proj_bias", "down_b", V1DType::kBF16},
      {"mlp.experts.gate_up_proj_blocks", "gate_up_blocks", V1DType::kU8},
      {"mlp.experts.gate_up_proj_scales", "gate_up_scales", V1DType::kU8},
      {"mlp.experts.down_proj_blocks", "down_blocks", V1DType::kU8},
      {"mlp.experts.down_proj_scales", "down_scales", V1DType::kU8}};
  return t;
}

}  // namespace

std::optional<SeedSlot> seed_slot(const std::string& hf) {
  for (int i = 0; i < 3; ++i)
    if (hf == kTop[i].hf) return SeedSlot{kTop[i].seed, kTop[i].dtype, 0, i, kTop[i].dtype == V1DType::kF32};
  static const std::regex layer(R"(model\.layers\.(\d{1,9})\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, layer)) return std::nullopt;
  const auto& t = per_layer();
  for (size_t i = 0; i < t.size(); ++i)
    if (m[2] == std::get<0>(t[i])) {
      const uint64_t l = std::stoull(m[1]);
      const V1DType d = std::get<2>(t[i]);
      return SeedSlot{"L" + std::to_string(l) + "." + std::get<1>(t[i]), d, l + 1, int(i), d == V1DType::kF32};
    }
  return std::nullopt;
}

std::optional<std::string> hf_name_of_seed(const std::string& v1) {
  for (const auto& t : kTop)
    if (v1 == t.seed) return std::string(t.hf);
  static const std::regex layer(R"(L(\d{1,9})\.(.+))");
  std::smatch m;
  if (!std::regex_match(v1, m, layer)) return std::nullopt;
  for (const auto& [hf, seed, dtype] : per_layer())
    if (m[2] == seed) return "model.layers." + std::to_string(std::stoull(m[1])) + "." + hf;
  return std::nullopt;
}

}  // namespace iris
