#include "quant/int_group.h"

#include "common/float_bits.h"

namespace iris::quant {

float int_group_value(float scale, int32_t q_minus_z, DType scale_dtype) {
  const float product = scale * float(q_minus_z);  // exact for F16 / BF16 scales; F32 rounds once, as torch does
  switch (scale_dtype) {
    case DType::kF16: return f16_to_f32(f32_to_f16(product));
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(product));
    default: return product;
  }
}

void int_group_decode_rows(const IntGroupRows& r, float* out) {
  for (uint64_t row = 0; row < r.rows; ++row) {
    const uint8_t* q = r.codes + row * r.k;
    const float* s = r.scales + row * r.groups;
    const int32_t* z = r.zeros ? r.zeros + row * r.groups : nullptr;
    float* o = out + row * r.k;
    for (uint64_t c = 0; c < r.k; ++c) {
      const uint32_t g = r.group_of[c];
      o[c] = int_group_value(s[g], int32_t(q[c]) - (z ? z[g] : 0), r.scale_dtype);
    }
  }
}

}  // namespace iris::quant
