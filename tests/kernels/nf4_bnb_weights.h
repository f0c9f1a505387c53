// The oracle of NF4's declared BF16 table (LaunchConfig::nf4_bf16_table): each weight as
// bitsandbytes' kgemm_4bit_inference_naive forms it, bf16(bf16(t) * bf16(absmax)), built on the
// host from the CPU reference decode alone -- never from a kernel -- so that a GEMV with that
// table can be held to the exact table's bound against it (its weights must be these bits).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/float_bits.h"
#include "formats/tensor_decode.h"

namespace iris::test {

// p rounded once to the nearest BF16 (ties to even), subnormals and overflow included. p is
// the exact product of two BF16s (16 significant bits), so no earlier rounding hides in it.
inline float round_to_bf16(double p) {
  if (std::isnan(p) || std::isinf(p) || p == 0) return float(p);
  const int e = std::ilogb(p);
  const int ulp = e < -126 ? -133 : e - 7;  // BF16: 8 significant bits, subnormal spacing 2^-133
  const double r = std::ldexp(std::nearbyint(std::ldexp(p, -ulp)), ulp);
  const double max_bf16 = std::ldexp(255.0, 120);  // 0x7F7F: (2 - 2^-7) * 2^127
  if (std::fabs(r) > max_bf16) return std::copysign(INFINITY, p);
  return float(r);
}

// The absmax of every element of an NF4 tensor (row-major, as reference_decode writes), from
// a reference decode with every table value 1 (1 * absmax is exact).
inline bool nf4_element_absmax(const TensorDesc& desc, const ComponentBytes& host, uint64_t numel, std::vector<float>& out) {
  std::vector<float> ones(16, 1.f);
  ComponentBytes with_ones = host;
  with_ones[int(Role::kCodeTable)] = {reinterpret_cast<const uint8_t*>(ones.data()), ones.size() * 4};
  out.resize(numel);
  return reference_decode(desc, with_ones, out.data()).is_ok();
}

// The declared weights of an NF4 tensor whose CPU reference decode is `exact` (t * absmax in
// FP32, FORMAT.md section 6). The absmax of each element comes from a second reference decode
// with every table value 1 (1 * absmax is exact), its code from matching `exact` against
// fl(t[c] * absmax): where two codes give the same FP32 product (an absmax so small or large
// that they collide), both give the same declared weight up to a subnormal or an infinity of
// the same sign.
inline bool nf4_bnb_weights(const TensorDesc& desc, const ComponentBytes& host, const std::vector<float>& exact, std::vector<float>& out) {
  const auto& table_bytes = host[int(Role::kCodeTable)];
  if (table_bytes.size() != 16 * 4) return false;
  float table[16];
  std::memcpy(table, table_bytes.data(), sizeof table);
  std::vector<float> absmax;
  if (!nf4_element_absmax(desc, host, exact.size(), absmax)) return false;
  out.resize(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) {
    const float a = absmax[i];
    int code = -1;
    for (int c = 0; c < 16 && code < 0; ++c) {
      const float p = table[c] * a;
      if (f32_bits(p) == f32_bits(exact[i]) || (std::isnan(p) && std::isnan(exact[i]))) code = c;
    }
    if (code < 0) return false;  // the reference decode is not t * absmax: the oracle does not apply
    const double t16 = bf16_to_f32(f32_to_bf16(table[code])), a16 = bf16_to_f32(f32_to_bf16(a));
    out[i] = round_to_bf16(t16 * a16);
  }
  return true;
}

}  // namespace iris::test
