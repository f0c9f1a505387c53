// Which part of each tensor a tensor- and expert-parallel rank holds (FORMAT.md section 11),
// by model family, from the tensor's name and the model's config:
// - column-parallel (rows split): q, k, v, gate, up, expert gate_up, lm_head, embed_tokens
//   (by vocabulary); q by heads, k and v by key/value heads, each replicated over tp / n_kv
//   ranks when there are more ranks than key/value heads (TensorRT-LLM's dup_kv_weight);
// - row-parallel (columns split): o, down, expert down, by heads for o;
// - the MLP's intermediate dimension (gate/up rows, down columns, the experts' too) in parts on
//   whole quantization blocks of every tensor it runs through, the first parts one block wider
//   where equal parts would cut one (ModelShape::mlp_units);
// - experts: whole experts over the ep groups, each expert then split over the tp / ep ranks of
//   its group as above;
// - everything else (norms, routers, row-parallel biases, sinks split with q's heads aside):
//   replicated on every rank.
// The world is tp ranks; rank r is in expert group r / (tp / ep) and is rank r % (tp / ep) of it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "converter/shard/tensor_slice.h"

namespace iris {

struct ShardSpec {
  uint32_t tp = 1;  // ranks (attention and dense layers split tp ways)
  uint32_t ep = 1;  // expert groups; divides tp
};

struct ModelShape {
  std::string model_type;
  uint64_t heads = 0, kv_heads = 0, head_dim = 0;
  uint64_t experts = 0;  // routed experts (0: a dense model)
  // Each MLP's intermediate dimension (gate/up rows, down columns; a layer's experts share
  // one) is cut on multiples of this many of its elements, the first ranks one unit more where
  // equal parts would cross a quantization block (mlp_cut_units); by mlp_key, 1 where absent.
  std::map<std::string, uint64_t> mlp_units;
};

// From the archive's config.json; refuses a family without rules and a spec its shape cannot
// take (heads, key/value heads, experts not divisible), naming what.
Result<ModelShape> model_shape_for_sharding(const std::string& config_json, const std::string& model_type, ShardSpec spec,
                                            const std::string& where);

struct RankShare {
  bool present = true;  // false: the tensor belongs to another expert group
  Box box;
  bool split = false;   // the box is not the whole tensor
  bool ruled = true;    // false: replicated for want of a rule (a matrix no rule names)
};

// Where a tensor's rule cuts the MLP's intermediate dimension: the dimension, and how many of
// its elements one intermediate element spans there (2 for gpt-oss's gate_up rows and bias,
// gate and up interleaved; else 1). dim < 0: the rule cuts no intermediate dimension.
struct IntermediateCut {
  int dim = -1;
  uint64_t per_element = 1;
};
IntermediateCut intermediate_cut(const std::string& name, size_t rank);

// Which MLP a tensor of intermediate_cut belongs to: its name up to ".experts" for experts (a
// layer's experts are cut alike), else without its last two parts ("...mlp.gate_proj.weight" ->
// "...mlp").
std::string mlp_key(const std::string& name);

// For each MLP whose intermediate dimension `spec` cuts (dense ones over tp ranks, experts over
// their group's tp / ep), the unit (in intermediate elements) that every cut falls on: the
// least common multiple of its tensors' cut units (rows, columns) along that dimension, each
// translated through per_element. Refuses a unit past 2^32, naming the tensor.
struct UnitOfTensor {
  std::string name;
  size_t rank = 0;
  uint64_t row_unit = 1, column_unit = 1;
};
Result<std::map<std::string, uint64_t>> mlp_cut_units(const std::vector<UnitOfTensor>& tensors, ShardSpec spec, const std::string& where);

Result<RankShare> rank_share(const std::string& name, const std::vector<uint64_t>& shape, const ModelShape& m, ShardSpec spec,
                             uint32_t rank);

}  // namespace iris
