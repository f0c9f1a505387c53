// Element types of safetensors files (FORMATS.md 1.2) and their archive names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace iris {

enum class DType : uint8_t {
  kBool, kF4, kF6_E2M3, kF6_E3M2, kU8, kI8, kF8_E5M2, kF8_E4M3, kF8_E8M0, kF8_E4M3FNUZ,
  kF8_E5M2FNUZ, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kC64, kF64, kI64, kU64,
};

struct DTypeInfo {
  DType dtype;
  std::string_view safetensors_name;  // "BF16"
  std::string_view archive_name;      // "bf16": the format name of an unquantized tensor
  uint32_t bits;                      // per element
};

const DTypeInfo& dtype_info(DType d);
std::optional<DType> dtype_from_safetensors(std::string_view name);
std::optional<DType> dtype_from_archive_name(std::string_view name);
inline uint32_t dtype_bits(DType d) { return dtype_info(d).bits; }
inline std::string_view dtype_st_name(DType d) { return dtype_info(d).safetensors_name; }
inline std::string_view dtype_archive_name(DType d) { return dtype_info(d).archive_name; }

// Bytes for `numel` elements; nullopt on overflow or when the bits do not fill whole bytes.
std::optional<uint64_t> dtype_bytes(DType d, uint64_t numel);
// The float types whose values decode to FP32 (bf16, f16, f32 exactly; f64 rounds).
inline bool is_float_dtype(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32 || d == DType::kF64; }

}  // namespace iris
