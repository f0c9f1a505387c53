// Groups a snapshot's raw tensors into logical tensors: one per weight, whatever the number
// of companion tensors a quantized checkpoint stores for it (FORMATS.md 2.4, 3.5, 4.3).
//
//   gpt-oss MXFP4      X_blocks U8 [..., N, K/32, 16] + X_scales U8 [..., N, K/32]   -> X
//   bitsandbytes 4-bit P.weight U8 + P.weight.{absmax, quant_map, nested_absmax,
//                      nested_quant_map, quant_state.bitsandbytes__nf4|fp4}          -> P.weight
//   FP8 E4M3           P.weight F8_E4M3 + P.weight_scale_inv | P.weight_scale        -> P.weight
//   GPTQ, AWQ          P.qweight + P.qzeros + P.scales [+ P.g_idx]                  -> P.weight
//   compressed-tensors P.weight_packed + P.weight_scale [+ P.weight_zero_point,
//   pack-quantized     P.weight_g_idx, P.weight_shape]                               -> P.weight
//
// Everything else is a raw tensor. A companion without its weight, or a set whose shapes
// disagree, is an error naming the file and tensor.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "converter/sources/packed_integers.h"
#include "converter/sources/snapshot.h"
#include "formats/manifest.h"
#include "formats/tensor_desc.h"

namespace iris {

// Codes an .iris archive stores tiled (formats/tile_layout.h), where a checkpoint stores them
// row-major: read back row-major through read_tiled_codes (sources/tiled_codes.h).
struct TiledCodes {
  MatrixGeometry geometry;
  Layout layout;
};

struct SourcePart {
  Role role;  // the archive component it becomes
  SnapshotTensor ref;
  std::optional<TiledCodes> tiled = std::nullopt;  // an archive source's tiled codes; row-major bytes otherwise
  // A checkpoint companion that no archive component stands for (a zero point, a g_idx): the
  // role its record names instead of `role`'s.
  const char* label = nullptr;
};

// A check run once, by whichever reader of a tensor's bytes comes first, from any thread: an
// archive source's checksums, verified as its tensor is first read (from the page cache then,
// so the file is read once), never silently skipped.
class CheckOnce {
 public:
  explicit CheckOnce(std::function<Status()> check) : check_(std::move(check)) {}
  Status run() {
    std::call_once(once_, [this] { result_ = check_(); });
    return result_;
  }

 private:
  std::function<Status()> check_;
  std::once_flag once_;
  Status result_;
};

struct SourceTensor {
  TensorDesc desc;  // layout not chosen yet
  std::vector<SourcePart> parts;
  std::shared_ptr<CheckOnce> check;  // an archive source's checksums; null for a checkpoint
  // An archive source's record of where its tensor came from (the original checkpoint's
  // companions, FORMAT.md section 3), carried on as it is, parsed only if the tensor is
  // carried over (a requantized tensor gets a record of its own); empty for a checkpoint.
  std::optional<SourceRecord> recorded_source;
  // Integer codes packed by GPTQ, AWQ or compressed-tensors (packed_integers.h): desc is the
  // dequantized weight (format raw, the scale's dtype), which no archive format holds as
  // stored, so the tensor is always decoded; parts list its checkpoint tensors, codes first.
  std::shared_ptr<const PackedIntegers> packed;
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
  // Packed-integer checkpoints' semantic checks (packed_integers.h) that may be accepted.
  PackedIntegerAllowances packed;
};

// An archive source (Snapshot::open_archive) gives its stored tensors as they are, codes tiled.
// Otherwise:
// Fails on a tensor that looks quantized but whose companions are missing or of a scheme iris
// does not read (FP8 without a scale, a bitsandbytes U8 weight without a quant_state, GPTQ/AWQ
// packing): converting it raw would write wrong weights with exit 0.
Result<std::vector<SourceTensor>> group_source_tensors(const Snapshot& snapshot, const GroupingOptions& options = {});

// Parses a logical dtype name as written in config.json / bnb quant_state ("bfloat16").
std::optional<DType> dtype_from_torch_name(const std::string& name);

}  // namespace iris
