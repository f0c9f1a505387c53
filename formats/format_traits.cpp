#include "formats/format_traits.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "formats/tensor_desc.h"

namespace iris {

using nlohmann::json;

namespace {

constexpr const char* kRoleNames[kRoleCount] = {"data", "codes", "scales", "absmax", "nested_absmax", "code_table",
                                                "nested_code_table", "quant_state", "zero_points", "permutation", "tensor_scale"};

constexpr Role kRawRoles[] = {Role::kData};
constexpr Role kMxfp4Roles[] = {Role::kCodes, Role::kScales};
constexpr Role kBnbRoles[] = {Role::kCodes, Role::kAbsmax, Role::kNestedAbsmax, Role::kCodeTable, Role::kNestedCodeTable,
                              Role::kQuantState};
constexpr Role kFp8Roles[] = {Role::kCodes, Role::kScales};
constexpr Role kIntGroupRoles[] = {Role::kCodes, Role::kScales, Role::kZeroPoints, Role::kPermutation};
constexpr Role kNvfp4Roles[] = {Role::kCodes, Role::kScales, Role::kTensorScale};

constexpr ParamSpec kMxfp4Params[] = {
    {"block_size", ParamType::kUnsigned, true},
    {"element", ParamType::kString, true, "e2m1"},
    {"scale_encoding", ParamType::kString, true, "e8m0"},
    {"nibble_order", ParamType::kString, true, "low_first"},
    {"scale_rule", ParamType::kString, false},  // requantized archives: "ocp_floor" or "search"
};
constexpr ParamSpec kBnbParams[] = {
    {"block_size", ParamType::kUnsigned, true},
    {"nibble_order", ParamType::kString, true, "high_first"},
    {"double_quant", ParamType::kBool, true},
    {"quant_state_bytes", ParamType::kUnsigned, true},
    {"nested_block_size", ParamType::kUnsigned, false},     // double_quant only
    {"nested_offset", ParamType::kNumber, false},           // double_quant only
    {"nested_offset_f32_bits", ParamType::kString, false},  // double_quant only
};
constexpr ParamSpec kFp8Params[] = {
    {"scale_granularity", ParamType::kString, true},
    {"scale_dtype", ParamType::kString, true},
    {"scale_shape", ParamType::kShape, true},
    {"scale_name", ParamType::kString, true},
    {"block_n", ParamType::kUnsigned, false},     // block only
    {"block_k", ParamType::kUnsigned, false},     // block only
    {"group_size", ParamType::kUnsigned, false},  // group only
};

constexpr ParamSpec kIntGroupParams[] = {
    {"bits", ParamType::kUnsigned, true},
    {"group_size", ParamType::kUnsigned, true},
    {"scale_dtype", ParamType::kString, true},
    {"zero_points", ParamType::kBool, true},
    {"act_order", ParamType::kBool, true},
    {"post_factor", ParamType::kNumber, false},  // 2.6: LLM.int8's FP32 1/127; absent: 1
};

constexpr ParamSpec kNvfp4Params[] = {
    {"block_size", ParamType::kUnsigned, true},
    {"element", ParamType::kString, true, "e2m1"},
    {"scale_encoding", ParamType::kString, true, "e4m3"},
    {"nibble_order", ParamType::kString, true, "low_first"},
    {"tensor_scale", ParamType::kString, true},     // "multiplies" or "divides"
    {"negative_zero", ParamType::kBool, true},
    {"tensor_scale_shape", ParamType::kShape, true},
    {"scale_rule", ParamType::kString, false},  // requantized archives: "modelopt"
};

// NF4 code 7 is 0.0 (code 0 is -1.0); MXFP4, bnb FP4 and E4M3 code 0 is +0.
constexpr FormatTraits kTraits[] = {
    {Format::kRaw, "raw", 0, 1, 0x00, kRawRoles, {}},
    {Format::kMxfp4, "mxfp4", 4, 32, 0x00, kMxfp4Roles, kMxfp4Params},
    {Format::kNf4, "nf4", 4, 2, 0x77, kBnbRoles, kBnbParams},
    {Format::kBnbFp4, "bnb_fp4", 4, 2, 0x00, kBnbRoles, kBnbParams},
    {Format::kFp8E4M3, "fp8_e4m3", 8, 1, 0x00, kFp8Roles, kFp8Params},
    // int_group: code_bits is the tensor's `bits` (tensor_desc.h: code_bits_of); rows are
    // padded to 8 elements, whole bytes at any width. Padding codes are 0 (FORMAT.md 4.5).
    {Format::kIntGroup, "int_group", 0, 8, 0x00, kIntGroupRoles, kIntGroupParams},
    {Format::kNvfp4, "nvfp4", 4, 16, 0x00, kNvfp4Roles, kNvfp4Params},
};

bool is_unsigned(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

bool has_type(const json& v, ParamType t) {
  switch (t) {
    case ParamType::kUnsigned: return is_unsigned(v);
    case ParamType::kBool: return v.is_boolean();
    case ParamType::kNumber: return v.is_number();
    case ParamType::kString: return v.is_string();
    case ParamType::kShape:
      if (!v.is_array() || v.size() > 8) return false;
      for (const auto& e : v)
        if (!is_unsigned(e) || e.get<uint64_t>() >= (uint64_t(1) << 48)) return false;
      return true;
  }
  return false;
}

const char* type_text(ParamType t) {
  switch (t) {
    case ParamType::kUnsigned: return "a non-negative integer";
    case ParamType::kBool: return "true or false";
    case ParamType::kNumber: return "a number";
    case ParamType::kString: return "a string";
    case ParamType::kShape: return "a list of at most 8 dimensions";
  }
  return "?";
}

bool present(const TensorDesc& d, const char* key) { return d.params.contains(key); }

Status must_be_absent(const TensorDesc& d, const char* key, const std::string& unless) {
  if (present(d, key)) return invalid_input(tensor_context(d) + "format parameter '" + key + "' is only valid " + unless);
  return Status::ok();
}

Status must_be_present(const TensorDesc& d, const char* key, const std::string& because) {
  if (!present(d, key)) return invalid_input(tensor_context(d) + "format parameter '" + key + "' is missing (required " + because + ")");
  return Status::ok();
}

}  // namespace

const char* role_name(Role r) { return kRoleNames[static_cast<int>(r)]; }

std::optional<Role> role_from_name(std::string_view name) {
  for (int i = 0; i < kRoleCount; ++i)
    if (name == kRoleNames[i]) return static_cast<Role>(i);
  return std::nullopt;
}

const char* scale_granularity_name(ScaleGranularity g) {
  switch (g) {
    case ScaleGranularity::kTensor: return "tensor";
    case ScaleGranularity::kChannel: return "channel";
    case ScaleGranularity::kBlock: return "block";
    case ScaleGranularity::kGroup: return "group";
  }
  return "?";
}

const FormatTraits& format_traits(Format f) { return kTraits[static_cast<int>(f)]; }
const char* format_name(Format f) { return format_traits(f).name; }

std::optional<Format> format_from_name(std::string_view name) {
  for (const auto& t : kTraits)
    if (t.format != Format::kRaw && name == t.name) return t.format;
  return std::nullopt;
}

Status check_param_keys(const TensorDesc& d) {
  const FormatTraits& t = format_traits(d.format);
  if (!d.params.is_object()) return invalid_input(tensor_context(d) + "format parameters are not a JSON object");
  for (const auto& [key, value] : d.params.items()) {
    const ParamSpec* spec = nullptr;
    for (const auto& p : t.params)
      if (key == p.key) spec = &p;
    if (!spec) return invalid_input(tensor_context(d) + "unknown " + t.name + " format parameter '" + key + "'");
    if (!has_type(value, spec->type))
      return invalid_input(tensor_context(d) + "format parameter '" + key + "' is " + value.dump() + ", not " + type_text(spec->type));
    if (spec->fixed && value.get<std::string>() != spec->fixed)
      return invalid_input(tensor_context(d) + "format parameter '" + key + "' is \"" + value.get<std::string>() + "\"; " + t.name +
                           " needs \"" + spec->fixed + "\"");
  }
  for (const auto& p : t.params)
    if (p.required && !present(d, p.key)) return invalid_input(tensor_context(d) + "format parameter '" + p.key + "' is missing");
  return Status::ok();
}

Result<Mxfp4Params> mxfp4_params(const TensorDesc& d) {
  if (d.format != Format::kMxfp4) return internal_error(tensor_context(d) + "not an mxfp4 tensor");
  IRIS_TRY(check_param_keys(d));
  if (d.params["block_size"].get<uint64_t>() != 32) return invalid_input(tensor_context(d) + "mxfp4 block_size must be 32");
  Mxfp4Params p;
  if (present(d, "scale_rule")) {
    p.scale_rule = d.params["scale_rule"].get<std::string>();
    if (p.scale_rule != "ocp_floor" && p.scale_rule != "search")
      return invalid_input(tensor_context(d) + "unknown scale_rule '" + p.scale_rule + "' (ocp_floor or search)");
  }
  return p;
}

Result<Bnb4Params> bnb4_params(const TensorDesc& d) {
  if (d.format != Format::kNf4 && d.format != Format::kBnbFp4) return internal_error(tensor_context(d) + "not a bitsandbytes 4-bit tensor");
  IRIS_TRY(check_param_keys(d));
  Bnb4Params p;
  p.block_size = d.params["block_size"].get<uint64_t>();
  if (p.block_size < 32 || p.block_size > 4096 || (p.block_size & (p.block_size - 1)))
    return invalid_input(tensor_context(d) + "block_size " + std::to_string(p.block_size) + " is not a power of two in [32, 4096]");
  p.double_quant = d.params["double_quant"].get<bool>();
  p.quant_state_bytes = d.params["quant_state_bytes"].get<uint64_t>();
  if (p.quant_state_bytes > (1u << 20)) return invalid_input(tensor_context(d) + "quant_state_bytes too large");
  if (!p.double_quant) {
    for (const char* k : {"nested_block_size", "nested_offset", "nested_offset_f32_bits"}) IRIS_TRY(must_be_absent(d, k, "with double_quant"));
    return p;
  }
  IRIS_TRY(must_be_present(d, "nested_block_size", "with double_quant"));
  IRIS_TRY(must_be_present(d, "nested_offset", "with double_quant"));
  p.nested_block_size = d.params["nested_block_size"].get<uint64_t>();
  if (p.nested_block_size == 0 || p.nested_block_size > 65536) return invalid_input(tensor_context(d) + "nested_block_size out of range");
  // Below FLT_MAX plus half an ulp it rounds to a finite FP32; past that the cast is undefined.
  const double offset = d.params["nested_offset"].get<double>();
  if (!(std::fabs(offset) < 0x1.ffffffp+127)) {
    char v[32];
    std::snprintf(v, sizeof v, "%g", offset);
    return invalid_input(tensor_context(d) + "nested_offset " + v + " is not a finite FP32 value");
  }
  p.nested_offset = float(offset);
  if (present(d, "nested_offset_f32_bits")) {
    char want[11];
    uint32_t bits;
    std::memcpy(&bits, &p.nested_offset, 4);
    std::snprintf(want, sizeof want, "0x%08x", bits);
    if (d.params["nested_offset_f32_bits"].get<std::string>() != want)
      return invalid_input(tensor_context(d) + "nested_offset_f32_bits " + d.params["nested_offset_f32_bits"].get<std::string>() +
                           " disagrees with nested_offset (" + want + ")");
  }
  return p;
}

Result<Fp8Params> fp8_params(const TensorDesc& d) {
  if (d.format != Format::kFp8E4M3) return internal_error(tensor_context(d) + "not an fp8 tensor");
  IRIS_TRY(check_param_keys(d));
  Fp8Params p;
  const std::string g = d.params["scale_granularity"].get<std::string>();
  if (g == "tensor") p.granularity = ScaleGranularity::kTensor;
  else if (g == "channel") p.granularity = ScaleGranularity::kChannel;
  else if (g == "block") p.granularity = ScaleGranularity::kBlock;
  else if (g == "group") p.granularity = ScaleGranularity::kGroup;
  else return invalid_input(tensor_context(d) + "unknown scale_granularity '" + g + "'");
  const bool block = p.granularity == ScaleGranularity::kBlock, group = p.granularity == ScaleGranularity::kGroup;
  for (const char* k : {"block_n", "block_k"}) IRIS_TRY(block ? must_be_present(d, k, "for block scales") : must_be_absent(d, k, "for block scales"));
  IRIS_TRY(group ? must_be_present(d, "group_size", "for group scales") : must_be_absent(d, "group_size", "for group scales"));
  if (block) {
    p.block_n = d.params["block_n"].get<uint64_t>();
    p.block_k = d.params["block_k"].get<uint64_t>();
    if (!p.block_n || !p.block_k || p.block_n > 65536 || p.block_k > 65536) return invalid_input(tensor_context(d) + "FP8 block shape out of range");
  }
  if (group) {
    p.group_size = d.params["group_size"].get<uint64_t>();
    if (!p.group_size || p.group_size > 65536) return invalid_input(tensor_context(d) + "FP8 group_size out of range");
  }
  auto sdt = dtype_from_archive_name(d.params["scale_dtype"].get<std::string>());
  if (!sdt || (*sdt != DType::kF32 && *sdt != DType::kBF16 && *sdt != DType::kF16))
    return invalid_input(tensor_context(d) + "scale_dtype must be f32, bf16 or f16");
  p.scale_dtype = *sdt;
  p.scale_shape = d.params["scale_shape"].get<std::vector<uint64_t>>();
  p.scale_name = d.params["scale_name"].get<std::string>();
  return p;
}

Result<IntGroupParams> int_group_params(const TensorDesc& d) {
  if (d.format != Format::kIntGroup) return internal_error(tensor_context(d) + "not an int_group tensor");
  IRIS_TRY(check_param_keys(d));
  IntGroupParams p;
  const uint64_t bits = d.params["bits"].get<uint64_t>();
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) return invalid_input(tensor_context(d) + "int_group bits " + std::to_string(bits) + " is not 2, 3, 4 or 8");
  p.bits = uint32_t(bits);
  p.group_size = d.params["group_size"].get<uint64_t>();
  if (p.group_size == 0 || p.group_size > (uint64_t(1) << 40)) return invalid_input(tensor_context(d) + "int_group group_size out of range");
  auto sdt = dtype_from_archive_name(d.params["scale_dtype"].get<std::string>());
  if (!sdt || (*sdt != DType::kF32 && *sdt != DType::kBF16 && *sdt != DType::kF16))
    return invalid_input(tensor_context(d) + "scale_dtype must be f32, bf16 or f16");
  p.scale_dtype = *sdt;
  p.zero_points = d.params["zero_points"].get<bool>();
  p.act_order = d.params["act_order"].get<bool>();
  if (present(d, "post_factor")) {
    // An FP32 value, finite and nonzero, exactly: the archive says what is multiplied.
    const double f = d.params["post_factor"].get<double>();
    if (!std::isfinite(f) || f == 0.0 || double(float(f)) != f)
      return invalid_input(tensor_context(d) + "int_group post_factor " + d.params["post_factor"].dump() + " is not a finite, nonzero FP32 value");
    p.post_factor = float(f);
  }
  return p;
}

Result<Nvfp4Params> nvfp4_params(const TensorDesc& d) {
  if (d.format != Format::kNvfp4) return internal_error(tensor_context(d) + "not an nvfp4 tensor");
  IRIS_TRY(check_param_keys(d));
  if (d.params["block_size"].get<uint64_t>() != 16) return invalid_input(tensor_context(d) + "nvfp4 block_size must be 16");
  Nvfp4Params p;
  const std::string op = d.params["tensor_scale"].get<std::string>();
  if (op != "multiplies" && op != "divides") return invalid_input(tensor_context(d) + "nvfp4 tensor_scale '" + op + "' is neither multiplies nor divides");
  p.tensor_scale_divides = op == "divides";
  p.negative_zero = d.params["negative_zero"].get<bool>();
  p.tensor_scale_shape = d.params["tensor_scale_shape"].get<std::vector<uint64_t>>();
  if (present(d, "scale_rule")) {
    p.scale_rule = d.params["scale_rule"].get<std::string>();
    if (p.scale_rule != "modelopt") return invalid_input(tensor_context(d) + "unknown nvfp4 scale_rule '" + p.scale_rule + "' (modelopt)");
  }
  return p;
}

}  // namespace iris
