// One table per storage format: the single place that says which components a format has
// (as roles), which parameters it takes (with their types, and which are required), and how
// its codes are packed. Everything else - the descriptor check, the manifest reader, the
// CPU decoder, the kernels' views, the C API - asks this file instead of spelling role or
// parameter strings itself. Unknown or missing parameters are errors, never defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "formats/dtype.h"

namespace iris {

struct TensorDesc;

enum class Format { kRaw, kMxfp4, kNf4, kBnbFp4, kFp8E4M3, kIntGroup, kNvfp4 };
inline bool is_quantized(Format f) { return f != Format::kRaw; }

// The components a tensor's bytes are split into, in archive order (FORMAT.md section 4).
enum class Role : uint8_t { kData, kCodes, kScales, kAbsmax, kNestedAbsmax, kCodeTable, kNestedCodeTable, kQuantState, kZeroPoints, kPermutation, kTensorScale };
constexpr int kRoleCount = 11;
const char* role_name(Role r);
std::optional<Role> role_from_name(std::string_view name);
// A role a `source` record may name (FORMAT.md 3.1): a component's, or "companion", a
// checkpoint tensor that no component holds as it is (a GPTQ g_idx, a weight_shape).
inline bool source_role_ok(std::string_view name) { return name == "companion" || role_from_name(name).has_value(); }

enum class ScaleGranularity { kTensor, kChannel, kBlock, kGroup };
const char* scale_granularity_name(ScaleGranularity g);

enum class ParamType { kUnsigned, kBool, kNumber, kString, kShape };

// One format parameter as the manifest stores it.
struct ParamSpec {
  const char* key;
  ParamType type;
  bool required;              // false: may be absent (see the typed struct for when it applies)
  const char* fixed = nullptr;  // a string parameter that must hold exactly this value
};

struct FormatTraits {
  Format format;
  const char* name;       // the manifest's "format" ("raw" is never written: raw tensors use their dtype)
  uint32_t code_bits;     // bits per element of the codes (0 for raw)
  uint64_t row_unit;      // elements per packing unit of a stored row (rows are padded to it)
  uint8_t pad_byte;       // the code of +0, written into tile padding
  std::span<const Role> roles;        // every role the format can have, in archive order
  std::span<const ParamSpec> params;  // every parameter key it takes
};

const FormatTraits& format_traits(Format f);
const char* format_name(Format f);
std::optional<Format> format_from_name(std::string_view name);

// ---- Typed parameters, parsed from a descriptor's JSON (each function checks the keys
// first: an unknown key, a missing required one or a wrong type is kInvalidInput).

struct Mxfp4Params {
  std::string scale_rule;  // "" (as the source had it), "ocp_floor" or "search"
};

struct Bnb4Params {
  uint64_t block_size = 0;         // power of two in [32, 4096]
  bool double_quant = false;
  uint64_t nested_block_size = 0;  // double_quant only
  float nested_offset = 0.f;       // double_quant only: the JSON number converted to FP32
  uint64_t quant_state_bytes = 0;
};

struct Fp8Params {
  ScaleGranularity granularity = ScaleGranularity::kTensor;
  DType scale_dtype = DType::kF32;    // f32, bf16 or f16
  uint64_t block_n = 0, block_k = 0;  // block
  uint64_t group_size = 0;            // group
  std::vector<uint64_t> scale_shape;  // as the source stored the scales
  std::string scale_name;             // the source's scale suffix, e.g. "weight_scale_inv" (export)
};

// int_group (FORMAT.md 4.5): integer codes with a scale (and a zero point) per group of
// columns, the columns optionally permuted so that groups are contiguous (act-order).
struct IntGroupParams {
  uint32_t bits = 4;        // 2, 3, 4 or 8
  uint64_t group_size = 0;  // columns a group; >= K: one group a row
  DType scale_dtype = DType::kF16;
  bool zero_points = false;
  bool act_order = false;
  // Each value times this FP32 constant after its scale (2.6; bitsandbytes LLM.int8's 1/127).
  float post_factor = 1.0f;
};

// nvfp4 (FORMAT.md 4.6): E2M1 codes, an E4M3 scale per 16 elements of a row and an FP32
// scale per matrix, decoded as the producing tool decodes (quant/nvfp4.h).
struct Nvfp4Params {
  bool tensor_scale_divides = false;  // "divides" (compressed-tensors) or "multiplies" (ModelOpt)
  bool negative_zero = false;         // code 8 decodes to -0.0 (compressed-tensors) or +0.0 (ModelOpt)
  std::vector<uint64_t> tensor_scale_shape;  // as the source stored it ([] or [1] a matrix; [E] a stack)
  std::string scale_rule;             // "" (as the source had it) or "modelopt" (requantized with ModelOpt's arithmetic)
};

// Checks d.params against format_traits(d.format).params: no unknown key, every required key
// present with its type, fixed strings as fixed.
Status check_param_keys(const TensorDesc& d);
Result<Mxfp4Params> mxfp4_params(const TensorDesc& d);
Result<Bnb4Params> bnb4_params(const TensorDesc& d);
Result<Fp8Params> fp8_params(const TensorDesc& d);
Result<IntGroupParams> int_group_params(const TensorDesc& d);
Result<Nvfp4Params> nvfp4_params(const TensorDesc& d);

}  // namespace iris
