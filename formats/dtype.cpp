#include "formats/dtype.h"

#include <array>

#include "common/checked_math.h"

namespace iris {

namespace {
// Declared in increasing alignment, as the reference crate does.
constexpr std::array<DTypeInfo, 22> kTypes = {{
    {DType::kBool, "BOOL", "bool", 8},
    {DType::kF4, "F4", "f4", 4},
    {DType::kF6_E2M3, "F6_E2M3", "f6_e2m3", 6},
    {DType::kF6_E3M2, "F6_E3M2", "f6_e3m2", 6},
    {DType::kU8, "U8", "u8", 8},
    {DType::kI8, "I8", "i8", 8},
    {DType::kF8_E5M2, "F8_E5M2", "f8_e5m2", 8},
    {DType::kF8_E4M3, "F8_E4M3", "f8_e4m3", 8},
    {DType::kF8_E8M0, "F8_E8M0", "f8_e8m0", 8},
    {DType::kF8_E4M3FNUZ, "F8_E4M3FNUZ", "f8_e4m3fnuz", 8},
    {DType::kF8_E5M2FNUZ, "F8_E5M2FNUZ", "f8_e5m2fnuz", 8},
    {DType::kI16, "I16", "i16", 16},
    {DType::kU16, "U16", "u16", 16},
    {DType::kF16, "F16", "f16", 16},
    {DType::kBF16, "BF16", "bf16", 16},
    {DType::kI32, "I32", "i32", 32},
    {DType::kU32, "U32", "u32", 32},
    {DType::kF32, "F32", "f32", 32},
    {DType::kC64, "C64", "c64", 64},
    {DType::kF64, "F64", "f64", 64},
    {DType::kI64, "I64", "i64", 64},
    {DType::kU64, "U64", "u64", 64},
}};
}  // namespace

const DTypeInfo& dtype_info(DType d) { return kTypes[static_cast<size_t>(d)]; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.safetensors_name == name) return t.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_archive_name(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.archive_name == name) return t.dtype;
  return std::nullopt;
}

std::optional<uint64_t> dtype_bytes(DType d, uint64_t numel) {
  auto bits = checked_mul(numel, dtype_bits(d));
  if (!bits || *bits % 8 != 0) return std::nullopt;
  return *bits / 8;
}

}  // namespace iris
