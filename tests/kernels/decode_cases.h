// Inputs for the decode kernels' tests (kernels/decode_ops.h): real model shapes, awkward ones
// and hostile values, each case from its own seed. Used by the reference-vs-oracle tests (CPU)
// and the kernel-vs-reference tests (GPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/float_bits.h"

namespace iris::test {

inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(dist(rng));
  return v;
}

struct RouteCase {
  std::string name;
  uint32_t rows, experts, k, top_k;
  bool bias;
  enum Hostile { kNone, kNanRow, kInfRow, kTies, kZeroInput } hostile = kNone;
  uint32_t x_offset = 0;  // elements before x: misaligns it (the kernel's scalar path)
};

inline std::vector<RouteCase> route_cases() {
  return {
      {"gpt_oss_20b", 1, 32, 2880, 4, true},
      {"gpt_oss_120b", 1, 128, 2880, 4, true},
      {"mixtral", 1, 8, 4096, 2, false},
      {"three_rows", 3, 64, 2048, 6, true},
      {"most_experts_widest_k", 2, 1024, 512, 32, true},
      {"one_expert", 1, 1, 64, 1, false},
      {"k_not_multiple_of_8", 2, 40, 1003, 5, true},
      {"k_below_8", 1, 16, 5, 3, true},
      {"misaligned_x", 1, 32, 2880, 4, true, RouteCase::kNone, 1},
      {"nan_expert", 1, 32, 256, 4, true, RouteCase::kNanRow},
      {"inf_expert", 1, 32, 256, 4, false, RouteCase::kInfRow},
      {"tied_logits", 1, 32, 256, 8, true, RouteCase::kTies},
      {"zero_input", 1, 32, 256, 4, false, RouteCase::kZeroInput},
  };
}

// A GEMV's inputs, x possibly misaligned by x_offset elements: the router's and the dense
// GEMV's cases share them.
struct GemvData {
  std::vector<uint16_t> x_storage, w, bias;  // x_storage: x_offset elements, then x [rows, k]
  uint32_t x_offset = 0;
  const uint16_t* x() const { return x_storage.data() + x_offset; }
};

inline GemvData make_gemv_data(uint32_t x_rows, uint32_t n, uint32_t k, uint32_t x_offset, bool bias, uint32_t seed) {
  GemvData d;
  d.x_offset = x_offset;
  d.x_storage = random_bf16(size_t(x_rows) * k + x_offset, seed, 1.0f);
  d.w = random_bf16(size_t(n) * k, seed + 1, 0.05f);
  if (bias) d.bias = random_bf16(n, seed + 2, 0.5f);
  return d;
}

inline GemvData make_route_data(const RouteCase& c, uint32_t seed) {
  GemvData d = make_gemv_data(c.rows, c.experts, c.k, c.x_offset, c.bias, seed);
  const uint16_t nan = 0x7fc0, inf = 0x7f80;
  switch (c.hostile) {
    case RouteCase::kNanRow: d.w[size_t(c.experts / 2) * c.k + 3] = nan; break;
    case RouteCase::kInfRow: d.w[size_t(c.experts / 3) * c.k] = inf; break;
    case RouteCase::kTies:
      for (auto& v : d.w) v = 0;  // every logit is its bias: ties among equal biases
      for (uint32_t e = 0; e < c.experts; ++e) d.bias[e] = f32_to_bf16(float(e % 3));
      break;
    case RouteCase::kZeroInput:
      for (auto& v : d.x_storage) v = 0x8000;  // -0: every logit +-0
      break;
    case RouteCase::kNone: break;
  }
  return d;
}

struct DenseCase {
  std::string name;
  uint32_t n, k, batch;
  bool bias;
  uint32_t x_offset = 0;  // misaligns x: the scalar path
};

inline std::vector<DenseCase> dense_cases() {
  return {
      {"gpt_oss_qkv", 5120, 2880, 1, true},     {"gpt_oss_o", 2880, 4096, 1, true},   {"no_bias_batch_3", 300, 1024, 3, false},
      {"batch_16", 64, 512, 16, true},          {"k_not_multiple_of_8", 33, 1003, 2, true},
      {"k_below_8", 7, 5, 1, false},            {"misaligned_x", 40, 256, 1, true, 1}, {"one_row", 1, 8, 1, true},
  };
}

// The bias is made whether or not the case uses it (the GPU test uploads it either way).
inline GemvData make_dense_data(const DenseCase& c, uint32_t seed) {
  GemvData d = make_gemv_data(c.batch, c.n, c.k, c.x_offset, true, seed);
  if (c.n > 2) d.bias[2] = 0x7f80;  // +inf: that row is +inf (or NaN)
  return d;
}

struct AttentionCase {
  std::string name;
  uint32_t heads, kv_heads, head_dim, max_len, window;
  bool sinks;
  std::vector<int64_t> positions;
  enum Hostile { kNone, kHugeSink, kNanSink, kLargeScores } hostile = kNone;
};

inline std::vector<AttentionCase> attention_cases() {
  return {
      {"gpt_oss_sliding", 64, 8, 64, 88, 128, true, {0, 1, 40, 87}},
      {"gpt_oss_window_shorter_than_context", 64, 8, 64, 300, 128, true, {127, 128, 200, 299}},
      {"llama_full", 32, 8, 128, 96, 0, false, {0, 5, 95}},
      {"head_dim_80", 12, 4, 80, 50, 0, true, {0, 17, 49}},
      {"head_dim_256_mha", 4, 4, 256, 40, 16, false, {3, 39}},
      {"head_dim_1", 2, 1, 1, 10, 0, false, {9}},
      {"long_context", 8, 2, 64, 5000, 0, true, {4999}},
      {"position_out_of_range", 8, 2, 64, 16, 0, true, {-1, 16}},
      {"huge_sink", 8, 2, 64, 32, 0, true, {20}, AttentionCase::kHugeSink},
      {"nan_sink", 8, 2, 64, 32, 0, true, {20}, AttentionCase::kNanSink},
      {"large_scores", 8, 2, 64, 32, 0, false, {31}, AttentionCase::kLargeScores},
  };
}

struct AttentionData {
  std::vector<uint16_t> q, k, v, sinks;
};

inline AttentionData make_attention_data(const AttentionCase& c, uint32_t seed) {
  AttentionData d;
  const float qk_scale = c.hostile == AttentionCase::kLargeScores ? 30.0f : 1.0f;
  d.q = random_bf16(size_t(c.heads) * c.head_dim, seed, qk_scale);
  d.k = random_bf16(size_t(c.kv_heads) * c.max_len * c.head_dim, seed + 1, qk_scale);
  d.v = random_bf16(size_t(c.kv_heads) * c.max_len * c.head_dim, seed + 2, 1.0f);
  if (c.sinks) {
    d.sinks = random_bf16(c.heads, seed + 3, 1.0f);
    if (c.hostile == AttentionCase::kHugeSink) d.sinks[1] = f32_to_bf16(1e4f);
    if (c.hostile == AttentionCase::kNanSink) d.sinks[2] = 0x7fc0;
  }
  return d;
}

// Rotary tables [max_len, head_dim] as transformers makes them (the half-dim frequencies
// repeated, theta 10000) rounded to BF16, and this position's k and v, for the attention
// kernel's rotary + cache-write mode.
struct RopeData {
  std::vector<uint16_t> cos, sin, k_new, v_new;
};

inline RopeData make_rope_data(const AttentionCase& c, uint32_t seed) {
  RopeData r;
  const uint32_t D = c.head_dim, half = D / 2;
  r.cos.resize(size_t(c.max_len) * D), r.sin.resize(size_t(c.max_len) * D);
  for (uint32_t p = 0; p < c.max_len; ++p)
    for (uint32_t d = 0; d < D; ++d) {
      const double freq = std::pow(10000.0, -double(2 * (d % std::max(half, 1u))) / double(D));
      r.cos[size_t(p) * D + d] = f32_to_bf16(float(std::cos(p * freq)));
      r.sin[size_t(p) * D + d] = f32_to_bf16(float(std::sin(p * freq)));
    }
  const float scale = c.hostile == AttentionCase::kLargeScores ? 30.0f : 1.0f;
  r.k_new = random_bf16(size_t(c.kv_heads) * D, seed + 7, scale);
  r.v_new = random_bf16(size_t(c.kv_heads) * D, seed + 8, 1.0f);
  return r;
}

// The residual step and RMSNorm (ResidualNormArgs): model shapes, every chunks-per-thread
// instance (n up to 4096, 8192, 16384, 32768), the scalar path (n not a multiple of 8, x
// misaligned), in place, and hostile values.
struct ResidualNormCase {
  std::string name;
  uint32_t rows, terms, n, bias_rows;  // bias_rows 0: no bias
  bool weights, weight_in_f32;
  enum Hostile { kNone, kNanTerm, kInfTerm, kHuge, kZero, kZeroNoEps, kBadId, kTiny } hostile = kNone;
  uint32_t x_offset = 0;  // elements before x: misaligns it (the scalar path)
  bool in_place = false;  // x_out = x
};

inline std::vector<ResidualNormCase> residual_norm_cases() {
  using C = ResidualNormCase;
  return {
      {"gpt_oss_moe", 1, 4, 2880, 32, true, true},
      {"gpt_oss_attention", 1, 1, 2880, 0, false, true},
      {"llama", 1, 1, 4096, 0, false, false},
      {"mixtral_moe", 1, 2, 4096, 0, true, false},
      {"three_rows", 3, 3, 1000, 8, true, true},
      {"n_not_multiple_of_8", 2, 2, 1003, 5, true, false},
      {"n_below_8", 1, 1, 5, 0, false, true},
      {"two_chunks_a_thread", 1, 2, 5000, 0, true, false},
      {"four_chunks_a_thread", 2, 1, 12000, 0, false, true},
      {"widest", 1, 1, 32768, 0, false, false},
      {"misaligned_x", 1, 4, 2880, 32, true, true, C::kNone, 1},
      {"in_place", 2, 4, 2880, 32, true, true, C::kNone, 0, true},
      {"nan_term", 2, 4, 256, 8, true, true, C::kNanTerm},
      {"inf_term", 1, 2, 256, 0, true, false, C::kInfTerm},
      {"huge_squares_overflow", 1, 1, 256, 0, false, true, C::kHuge},
      {"zero_row", 1, 1, 256, 0, false, false, C::kZero},
      {"zero_row_eps_0", 1, 1, 256, 0, false, true, C::kZeroNoEps},
      {"bad_id", 2, 4, 256, 8, true, true, C::kBadId},
      {"tiny_values", 1, 1, 256, 0, false, true, C::kTiny},
  };
}

struct ResidualNormData {
  std::vector<uint16_t> x_storage, y, bias, weights, norm_w;  // x_storage: x_offset elements, then x [rows, n]
  std::vector<int32_t> ids;
  float eps = 1e-5f;
  const uint16_t* x() const { return x_storage.data() + x_offset; }
  uint32_t x_offset = 0;
};

inline ResidualNormData make_residual_norm_data(const ResidualNormCase& c, uint32_t seed) {
  ResidualNormData d;
  d.x_offset = c.x_offset;
  const size_t xn = size_t(c.rows) * c.n, yn = xn * c.terms;
  d.x_storage = random_bf16(xn + c.x_offset, seed, 1.0f);
  d.y = random_bf16(yn, seed + 1, 0.5f);
  d.norm_w = random_bf16(c.n, seed + 2, 1.0f);
  d.weights = random_bf16(size_t(c.rows) * c.terms, seed + 3, 0.5f);  // negative ones too
  if (c.bias_rows) {
    d.bias = random_bf16(size_t(c.bias_rows) * c.n, seed + 4, 0.5f);
    std::mt19937 rng(seed + 5);
    d.ids.resize(size_t(c.rows) * c.terms);
    for (auto& id : d.ids) id = int32_t(rng() % c.bias_rows);
  }
  uint16_t* x = d.x_storage.data() + c.x_offset;
  switch (c.hostile) {
    case ResidualNormCase::kNanTerm: d.y[size_t(c.n) + 7] = 0x7fc0; break;  // row 0, term 1, element 7
    case ResidualNormCase::kInfTerm: d.y[3] = 0xff80; break;                 // -inf: x' -inf, the norm NaN
    case ResidualNormCase::kHuge:
      for (size_t i = 0; i < xn; ++i) x[i] = f32_to_bf16(i % 2 ? 3e30f : -2e30f);  // squares over FP32's range
      break;
    case ResidualNormCase::kZero:
    case ResidualNormCase::kZeroNoEps:
      for (size_t i = 0; i < xn; ++i) x[i] = i % 2 ? 0x8000 : 0;
      for (auto& v : d.y) v = 0;
      if (c.hostile == ResidualNormCase::kZeroNoEps) d.eps = 0.0f;
      break;
    case ResidualNormCase::kBadId:
      d.ids[2] = int32_t(c.bias_rows);  // row 0
      d.ids[c.terms + 1] = -1;          // row 1
      break;
    case ResidualNormCase::kTiny:
      for (size_t i = 0; i < xn; ++i) x[i] = f32_to_bf16((i % 3 ? 1e-30f : -3e-39f));  // squares underflow; subnormals
      for (auto& v : d.y) v = 0;
      break;
    case ResidualNormCase::kNone: break;
  }
  return d;
}

// The gated activation (silu(gate) * up): gate and up as the two column halves of one
// [rows, 2n + pad] buffer (a grouped gate/up output), or as two buffers of their own. An
// offset of an element makes the rows misaligned (the kernel's element-by-element path).
struct GatedSiluCase {
  std::string name;
  uint32_t rows, n;
  bool halves;           // gate = columns [0, n), up = [n, 2n) of rows of stride 2n + pad
  uint32_t pad = 0;      // extra elements a row (halves only)
  uint32_t offset = 0;   // elements before the data
  bool hostile = true;   // special values among the random ones
};

inline std::vector<GatedSiluCase> gated_silu_cases() {
  return {
      {"llama_gate_up", 1, 14336, true},
      {"mixtral_top2", 2, 14336, false},
      {"qwen_odd_width", 1, 18944, true},
      {"three_rows_padded", 3, 1000, true, 8},
      {"stride_not_multiple_of_8", 2, 1003, true},
      {"separate_n_not_multiple_of_8", 3, 13, false},
      {"below_8", 1, 5, false},
      {"one", 4, 1, true, 3},
      {"misaligned", 2, 4096, true, 0, 1},
      {"plain_values", 1, 4096, false, 0, 0, false},
  };
}

struct GatedSiluData {
  std::vector<uint16_t> gate_storage, up_storage;  // halves: both in gate_storage
  uint64_t gate_at = 0, up_at = 0, stride = 0;     // element offsets and the row stride of each
  const uint16_t* gate() const { return gate_storage.data() + gate_at; }
  const uint16_t* up(bool halves) const { return (halves ? gate_storage.data() : up_storage.data()) + up_at; }
};

// Normal values of scale 4 (SiLU's curved part and its tails), plus where asked the values that
// break an activation: +-0, +-inf, NaN, subnormals, the largest BF16s, and gates at the
// exponential's overflow and underflow edges (|g| near 88).
inline GatedSiluData make_gated_silu_data(const GatedSiluCase& c, uint32_t seed) {
  GatedSiluData d;
  d.stride = c.halves ? 2ull * c.n + c.pad : c.n;
  const size_t body = size_t(c.rows) * d.stride;
  d.gate_storage = random_bf16(body + c.offset, seed, 4.0f);
  d.gate_at = c.offset;
  if (c.halves) {
    d.up_at = c.offset + c.n;
  } else {
    d.up_storage = random_bf16(body + c.offset, seed + 1, 4.0f);
    d.up_at = c.offset;
  }
  if (c.hostile) {
    const uint16_t specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001, 0x8001, 0x007f, 0x7f7f, 0xff7f,
                                 f32_to_bf16(88.5f), f32_to_bf16(-88.5f), f32_to_bf16(87.0f), f32_to_bf16(-87.5f), f32_to_bf16(-100.0f),
                                 f32_to_bf16(1e-38f), f32_to_bf16(-3e38f)};
    std::mt19937 rng(seed + 2);
    uint16_t* up = c.halves ? d.gate_storage.data() : d.up_storage.data();
    for (uint32_t r = 0; r < c.rows; ++r)
      for (uint32_t i = 0; i < c.n; i += 7) {  // about one element in seven, in gate or up or both
        const uint16_t v = specials[rng() % std::size(specials)];
        const uint64_t at = r * d.stride + i;
        const uint32_t which = rng() % 3;
        if (which != 1) d.gate_storage[d.gate_at + at] = v;
        if (which != 0) up[d.up_at + at] = specials[rng() % std::size(specials)];
      }
  }
  return d;
}

}  // namespace iris::test
