#include "quant/int_group.h"

#include "common/float_bits.h"

#include <cstring>

namespace iris::quant {

float int_group_value(float scale, int32_t q_minus_z, DType scale_dtype, float post_factor) {
  // Exact for F16 / BF16 scales; F32 rounds once, as torch does. Then the post factor, a
  // second rounding (none when it is 1).
  const float product = (scale * float(q_minus_z)) * post_factor;
  // (A NaN comes out as the canonical quiet NaN, FORMAT.md section 6.)
  switch (scale_dtype) {
    case DType::kF16: return canonical_nan_if_nan(f16_to_f32(f32_to_f16(product)));
    case DType::kBF16: return canonical_nan_if_nan(bf16_to_f32(f32_to_bf16(product)));
    default: return canonical_nan_if_nan(product);
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
      o[c] = int_group_value(s[g], int32_t(q[c]) - (z ? z[g] : 0), r.scale_dtype, r.post_factor);
    }
  }
}

void int_group_decode_stored(const IntGroupStored& s, float* out) {
  const uint64_t es = s.scale_dtype == DType::kF32 ? 4 : 2;  // (quant/ does not link formats/: no dtype_bits)
  for (uint64_t r = 0; r < s.rows; ++r) {
    const uint8_t* codes = s.codes + r * s.row_bytes;
    const uint8_t* scales = s.scales + r * s.groups * es;
    float* o = out + r * s.k;
    for (uint64_t j = 0; j < s.k; ++j) {
      const uint64_t g = j / s.group_size;
      float scale;
      if (es == 4) {
        std::memcpy(&scale, scales + 4 * g, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, scales + 2 * g, 2);
        scale = s.scale_dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      const int32_t z = s.zeros ? int32_t(s.zeros[r * s.groups + g]) : int32_t(1u << (s.bits - 1));
      o[s.perm ? s.perm[j] : j] = int_group_value(scale, int32_t(int_group_code(codes, s.bits, j)) - z, s.scale_dtype, s.post_factor);
    }
  }
}

}  // namespace iris::quant
