// Groups a snapshot's raw tensors into logical tensors: one per weight, whatever the number
// of companion tensors a quantized checkpoint stores for it (FORMATS.md 2.4, 3.5, 4.3).
//
//   gpt-oss MXFP4      X_blocks U8 [..., N, K/32, 16] + X_scales U8 [..., N, K/32]   -> X
//   bitsandbytes 4-bit P.weight U8 + P.weight.{absmax, quant_map, nested_absmax,
//                      nested_quant_map, quant_state.bitsandbytes__nf4|fp4}          -> P.weight
//   FP8 E4M3           P.weight F8_E4M3 + P.weight_scale_inv | P.weight_scale        -> P.weight
//
// Everything else is a raw tensor. A companion without its weight, or a set whose shapes
// disagree, is an error naming the file and tensor.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "converter/hf/snapshot.h"
#include "formats/tensor_desc.h"

namespace iris {

struct SourcePart {
  Role role;  // the archive component it becomes
  SnapshotTensor ref;
};

struct SourceTensor {
  TensorDesc desc;  // layout not chosen yet
  std::vector<SourcePart> parts;
  const SourcePart* part(Role role) const;
  nlohmann::json source_json() const;  // provenance: file and original tensors
  // append_json_text(source_json(), depth) (formats/manifest_entry_text.h) without the JSON:
  // a dry run measures 10^6 records, each ~15 allocations as JSON (issue 24 item 10).
  void append_source_text(std::string& out, int depth) const;
};

struct GroupingOptions {
  // An F8_E4M3 / F8_E5M2 tensor with no scale companion is an error by default: storing it raw
  // silently assumes a scale of 1. True: keep it raw, its values being the weights themselves.
  bool allow_unscaled_fp8 = false;
};

// Fails on a tensor that looks quantized but whose companions are missing or of a scheme iris
// does not read (FP8 without a scale, a bitsandbytes U8 weight without a quant_state, GPTQ/AWQ
// packing): converting it raw would write wrong weights with exit 0.
Result<std::vector<SourceTensor>> group_source_tensors(const Snapshot& snapshot, const GroupingOptions& options = {});

// Parses a logical dtype name as written in config.json / bnb quant_state ("bfloat16").
std::optional<DType> dtype_from_torch_name(const std::string& name);

}  // namespace iris
