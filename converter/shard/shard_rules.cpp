#include "converter/shard/shard_rules.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

#include "formats/json_limits.h"

namespace iris {

namespace {

const std::set<std::string> kFamilies = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t get_u64(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  return it != c.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// Part `p` of `parts` equal parts of [0, extent), each a multiple of `unit`.
Status equal_part(uint64_t extent, uint64_t parts, uint64_t p, uint64_t unit, const std::string& what, uint64_t* start, uint64_t* count) {
  uint64_t pu = 0;
  if (__builtin_mul_overflow(parts, unit, &pu) || pu == 0 || extent % pu != 0)
    return invalid_input(what + ": " + std::to_string(extent) + " cannot be split into " + std::to_string(parts) + " equal parts" +
                         (unit > 1 ? " of whole " + std::to_string(unit) + "-element units" : ""));
  *count = extent / parts;
  *start = p * *count;
  return Status::ok();
}

// Part `p` of `parts` of [0, extent) cut on multiples of `unit` (the end counts as one), as
// equal as whole units allow: the first extent-in-units % parts parts one unit longer. Where
// `parts` equal parts of whole units exist, these are they.
Status balanced_part(uint64_t extent, uint64_t parts, uint64_t p, uint64_t unit, const std::string& what, uint64_t* start,
                     uint64_t* count) {
  const uint64_t units = unit ? extent / unit + (extent % unit != 0) : 0;
  if (units < parts)
    return invalid_input(what + ": " + std::to_string(extent) + " cannot be split over " + std::to_string(parts) + " ranks" +
                         (unit > 1 ? " in whole " + std::to_string(unit) + "-element units" : ""));
  const uint64_t base = units / parts, extra = units % parts;
  const uint64_t first = p * base + std::min(p, extra), n = base + (p < extra ? 1 : 0);
  *start = first * unit;
  *count = std::min(extent, (first + n) * unit) - *start;
  return Status::ok();
}

// The expert index of a per-expert tensor name ("...experts.12.w1.weight"), or -1.
int64_t expert_of(const std::string& name) {
  const auto at = name.find(".experts.");
  if (at == std::string::npos) return -1;
  const char* b = name.data() + at + 9;
  const char* e = name.data() + name.size();
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p == b || p == e || *p != '.') return -1;
  return int64_t(v);
}

}  // namespace

Result<ModelShape> model_shape_for_sharding(const std::string& config_json, const std::string& model_type, ShardSpec spec,
                                            const std::string& where) {
  if (spec.tp == 0 || spec.ep == 0 || spec.tp % spec.ep != 0)
    return usage_error("--ep " + std::to_string(spec.ep) + " must divide --tp " + std::to_string(spec.tp));
  if (!kFamilies.count(model_type))
    return unsupported(where + ": no tensor-parallel split rules for model type '" + model_type +
                       "' (iris has them for llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, gpt_oss)");
  IRIS_ASSIGN_OR_RETURN(nlohmann::json c, parse_untrusted_json(config_json, where + ": config.json"));
  if (!c.is_object()) return invalid_input(where + ": config.json is not an object");
  if (auto t = c.find("text_config"); t != c.end() && t->is_object()) c = *t;
  ModelShape m;
  m.model_type = model_type;
  m.heads = get_u64(c, "num_attention_heads");
  m.kv_heads = get_u64(c, "num_key_value_heads");
  if (!m.kv_heads) m.kv_heads = m.heads;
  m.head_dim = get_u64(c, "head_dim");
  const uint64_t hidden = get_u64(c, "hidden_size");
  if (!m.head_dim && m.heads) m.head_dim = hidden / m.heads;
  m.experts = std::max(get_u64(c, "num_local_experts"), get_u64(c, "num_experts"));
  if (!m.heads || !m.head_dim) return invalid_input(where + ": config.json gives no num_attention_heads and head size");
  uint64_t rows = 0;
  if (m.heads > (uint64_t(1) << 32) || m.kv_heads > (uint64_t(1) << 32) || m.head_dim > (uint64_t(1) << 32) ||
      __builtin_mul_overflow(m.heads, m.head_dim, &rows))
    return invalid_input(where + ": config.json's heads (" + std::to_string(m.heads) + ", " + std::to_string(m.kv_heads) + " key/value) of " +
                         std::to_string(m.head_dim) + " are out of range");
  if (m.heads % spec.tp != 0)
    return invalid_input(where + ": " + std::to_string(m.heads) + " attention heads cannot be split over " + std::to_string(spec.tp) + " ranks");
  if (spec.tp <= m.kv_heads ? m.kv_heads % spec.tp != 0 : spec.tp % m.kv_heads != 0)
    return invalid_input(where + ": " + std::to_string(m.kv_heads) + " key/value heads cannot be split over (or replicated evenly on) " +
                         std::to_string(spec.tp) + " ranks");
  if (spec.ep > 1 && (!m.experts || m.experts % spec.ep != 0))
    return invalid_input(where + ": " + std::to_string(m.experts) + " experts cannot be distributed over " + std::to_string(spec.ep) +
                         " expert groups");
  return m;
}

IntermediateCut intermediate_cut(const std::string& name, size_t r) {
  const bool expert = expert_of(name) >= 0;
  const bool stacked = name.find(".experts.") != std::string::npos && !expert;
  if (stacked) {  // gpt-oss: [E, 2I, H] gate_up, [E, 2I] its bias, [E, H, I] down
    if (ends_with(name, ".gate_up_proj") && r >= 3) return {int(r - 2), 2};
    if (ends_with(name, ".gate_up_proj_bias") && r == 2) return {1, 2};
    if (ends_with(name, ".down_proj") && r >= 3) return {int(r - 1), 1};
    return {};
  }
  const bool rows = ends_with(name, ".gate_proj.weight") || ends_with(name, ".up_proj.weight") ||
                    (expert && (ends_with(name, ".w1.weight") || ends_with(name, ".w3.weight")));
  const bool row_bias = !expert && (ends_with(name, ".gate_proj.bias") || ends_with(name, ".up_proj.bias"));
  const bool columns = ends_with(name, ".down_proj.weight") || (expert && ends_with(name, ".w2.weight"));
  if (rows && r >= 2) return {int(r - 2), 1};
  if (row_bias && r >= 1) return {r == 1 ? 0 : int(r - 2), 1};
  if (columns && r >= 2) return {int(r - 1), 1};
  return {};
}

std::string mlp_key(const std::string& name) {
  const auto at = name.find(".experts.");
  if (at != std::string::npos) return name.substr(0, at + 8);
  const auto last = name.rfind('.');
  const auto before = last == std::string::npos || last == 0 ? std::string::npos : name.rfind('.', last - 1);
  return before == std::string::npos ? name : name.substr(0, before);
}

Result<std::map<std::string, uint64_t>> mlp_cut_units(const std::vector<UnitOfTensor>& tensors, ShardSpec spec, const std::string& where) {
  std::map<std::string, uint64_t> units;
  for (const auto& t : tensors) {
    const IntermediateCut c = intermediate_cut(t.name, t.rank);
    if (c.dim < 0) continue;
    const bool expert = t.name.find(".experts.") != std::string::npos;
    if ((expert ? spec.tp / spec.ep : spec.tp) <= 1) continue;  // held whole: no cut to fall anywhere
    const uint64_t along = size_t(c.dim) + 1 == t.rank ? t.column_unit : size_t(c.dim) + 2 == t.rank ? t.row_unit : 1;
    const uint64_t need = std::max<uint64_t>(along / std::gcd(along, c.per_element), 1);  // intermediate elements
    uint64_t& unit = units.try_emplace(mlp_key(t.name), 1).first->second;
    uint64_t lcm = 0;
    if (__builtin_mul_overflow(unit / std::gcd(unit, need), need, &lcm) || lcm > (uint64_t(1) << 32))
      return invalid_input(where + ": tensor '" + t.name + "': its quantization blocks and its MLP's other tensors' have no common cut under 2^32");
    unit = lcm;
  }
  return units;
}

Result<RankShare> rank_share(const std::string& name, const std::vector<uint64_t>& shape, const ModelShape& m, ShardSpec spec,
                             uint32_t rank) {
  RankShare s;
  s.box = Box::whole(shape);
  const size_t r = shape.size();
  const uint64_t tp = spec.tp, group_size = spec.tp / spec.ep, group = rank / group_size, in_group = rank % group_size;
  const std::string what = "tensor '" + name + "'";
  // Cuts dimension d into `parts` equal parts and keeps part p.
  auto cut = [&](size_t d, uint64_t parts, uint64_t p, uint64_t unit) -> Status {
    if (parts <= 1) return Status::ok();
    if (d >= r) return invalid_input(what + ": " + std::to_string(r) + " dimensions, too few for its split rule");
    IRIS_TRY(equal_part(shape[d], parts, p, unit, what, &s.box.start[d], &s.box.count[d]));
    s.split = true;
    return Status::ok();
  };
  // Cuts the MLP's intermediate dimension into `parts` on multiples of its MLP's unit.
  const IntermediateCut mlp = intermediate_cut(name, r);
  auto cut_intermediate = [&](uint64_t parts, uint64_t p) -> Status {
    if (parts <= 1) return Status::ok();
    const size_t d = size_t(mlp.dim);
    if (shape[d] % mlp.per_element != 0)
      return invalid_input(what + ": " + std::to_string(shape[d]) + " rows are not whole gate/up pairs");
    uint64_t start = 0, count = 0;
    const auto unit = m.mlp_units.find(mlp_key(name));
    IRIS_TRY(balanced_part(shape[d] / mlp.per_element, parts, p, unit == m.mlp_units.end() ? 1 : unit->second, what, &start, &count));
    s.box.start[d] = start * mlp.per_element;
    s.box.count[d] = count * mlp.per_element;
    s.split = true;
    return Status::ok();
  };
  const bool matrix = r >= 2;
  const bool weight = ends_with(name, ".weight"), bias = ends_with(name, ".bias");
  const int64_t expert = expert_of(name);
  const bool stacked_experts = name.find(".experts.") != std::string::npos && expert < 0;  // gpt-oss: [E, ...]
  if (tp == 1) return s;

  // Attention.
  if ((ends_with(name, ".q_proj.weight") || ends_with(name, ".q_proj.bias")) && r >= 1) {
    IRIS_TRY(cut(r == 1 ? 0 : r - 2, tp, rank, m.head_dim));
    return s;
  }
  if ((ends_with(name, ".k_proj.weight") || ends_with(name, ".k_proj.bias") || ends_with(name, ".v_proj.weight") ||
       ends_with(name, ".v_proj.bias")) && r >= 1) {
    const size_t d = r == 1 ? 0 : r - 2;
    uint64_t kv_rows = 0;
    if (__builtin_mul_overflow(m.kv_heads, m.head_dim, &kv_rows) || shape[d] != kv_rows)
      return invalid_input(what + ": " + std::to_string(shape[d]) + " rows are not " + std::to_string(m.kv_heads) + " key/value heads of " +
                           std::to_string(m.head_dim));
    if (tp <= m.kv_heads) {
      IRIS_TRY(cut(d, tp, rank, m.head_dim));
    } else {  // more ranks than heads: each head on tp / kv_heads ranks
      s.box.start[d] = (rank / (tp / m.kv_heads)) * m.head_dim;
      s.box.count[d] = m.head_dim;
      s.split = m.kv_heads > 1;
    }
    return s;
  }
  if (ends_with(name, ".o_proj.weight") && matrix) {
    IRIS_TRY(cut(r - 1, tp, rank, m.head_dim));
    return s;
  }
  if (ends_with(name, ".self_attn.sinks") && r == 1) {
    IRIS_TRY(cut(0, tp, rank, 1));
    return s;
  }
  // Experts.
  if (expert >= 0) {
    if (!matrix && weight) return invalid_input(what + ": an expert's weight must be a matrix, not " + std::to_string(r) + "-dimensional");
    if (!m.experts || uint64_t(expert) >= m.experts) return invalid_input(what + ": expert " + std::to_string(expert) + " of " + std::to_string(m.experts));
    s.present = uint64_t(expert) / (m.experts / spec.ep) == group;
    if (!s.present) return s;
    if (mlp.dim >= 0) IRIS_TRY(cut_intermediate(group_size, in_group));
    else if (matrix && weight) s.ruled = false;
    s.split = s.split || spec.ep > 1;
    return s;
  }
  if (stacked_experts && r >= 2) {  // gpt-oss: [E, 2I, H] gate_up (gate and up interleaved by rows), [E, H, I] down, biases [E, 2I], [E, H]
    IRIS_TRY(cut(0, spec.ep, group, 1));
    if (mlp.dim >= 0) IRIS_TRY(cut_intermediate(group_size, in_group));  // gate_up: whole gate/up pairs
    else if (!ends_with(name, ".down_proj_bias")) s.ruled = false;
    return s;
  }
  // Routers: every rank scores every expert.
  if (ends_with(name, ".router.weight") || ends_with(name, ".router.bias") || ends_with(name, ".block_sparse_moe.gate.weight") ||
      ends_with(name, ".mlp.gate.weight") || ends_with(name, ".shared_expert_gate.weight"))
    return s;
  // Dense MLP (shared experts too).
  if (mlp.dim >= 0) {
    IRIS_TRY(cut_intermediate(tp, rank));
    return s;
  }
  // Vocabulary: embedding and output rows.
  if ((ends_with(name, "embed_tokens.weight") || name == "lm_head.weight") && matrix) {
    IRIS_TRY(cut(0, tp, rank, 1));
    return s;
  }
  (void)bias;
  // Anything else is replicated; a matrix no rule names is reported.
  if (matrix && weight && shape[r - 1] > 1 && shape[r - 2] > 1 && name.find("norm") == std::string::npos) s.ruled = false;
  return s;
}

}  // namespace iris
