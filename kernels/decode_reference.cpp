// CPU references of the decode kernels (decode_ops.h): the same operations in the same order,
// so that each kernel's output equals its reference's bit for bit. Also the argument checks
// both share. Built with or without CUDA; compiled with -ffp-contract=off.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/float_bits.h"
#include "kernels/decode_math.h"
#include "kernels/decode_ops.h"

namespace iris {
namespace {

// The butterfly s[l] + s[l ^ m] for m = 16..1 over 32 lane sums: every lane ends with the same
// value (IEEE addition commutes), which is returned.
float butterfly32(std::array<float, 32> s) {
  for (int m = 16; m >= 1; m /= 2) {
    std::array<float, 32> t{};
    for (int l = 0; l < 32; ++l) t[l] = s[l] + s[l ^ m];
    s = t;
  }
  return s[0];
}

// A block's sum as the kernels form it: each warp's 32 partial sums by the butterfly, then the
// warps' results added in warp order.
template <size_t T>
float block_sum(const std::array<float, T>& s) {
  float total = 0.0f;
  for (size_t warp = 0; warp < T / 32; ++warp) {
    std::array<float, 32> lanes;
    std::copy(s.begin() + warp * 32, s.begin() + warp * 32 + 32, lanes.begin());
    const float v = butterfly32(lanes);
    total = warp == 0 ? v : total + v;
  }
  return total;
}

float router_logit(const uint16_t* x, const uint16_t* w, uint32_t k) {
  std::array<float, kMoeRouteThreads> s{};
  const uint32_t chunks = k / 8;
  for (int t = 0; t < kMoeRouteThreads; ++t) {
    float acc = 0.0f;
    for (uint32_t c = t; c < chunks; c += kMoeRouteThreads)
      for (int j = 0; j < 8; ++j) acc = fmaf(bf16_to_f32(x[c * 8 + j]), bf16_to_f32(w[c * 8 + j]), acc);
    if (uint32_t(t) < k % 8) acc = fmaf(bf16_to_f32(x[chunks * 8 + t]), bf16_to_f32(w[chunks * 8 + t]), acc);
    s[t] = acc;
  }
  return block_sum(s);
}

// The 32-lane dot product of dense_gemv (decode_ops.h).
float dot32(const uint16_t* x, const uint16_t* w, uint32_t k) {
  std::array<float, 32> s{};
  const uint32_t chunks = k / 8;
  for (int l = 0; l < 32; ++l) {
    float acc = 0.0f;
    for (uint32_t c = l; c < chunks; c += 32)
      for (int j = 0; j < 8; ++j) acc = fmaf(bf16_to_f32(x[c * 8 + j]), bf16_to_f32(w[c * 8 + j]), acc);
    if (uint32_t(l) < k % 8) acc = fmaf(bf16_to_f32(x[chunks * 8 + l]), bf16_to_f32(w[chunks * 8 + l]), acc);
    s[l] = acc;
  }
  return butterfly32(s);
}

}  // namespace

Status check_dense_gemv(const DenseGemvArgs& a) {
  if (!a.w || !a.x) return invalid_argument("dense gemv: w and x must not be NULL");
  if ((a.y == nullptr) == (a.y_f32 == nullptr)) return invalid_argument("dense gemv: exactly one of y (bf16) and y_f32 must be set");
  if (a.batch == 0 || a.batch > kDenseGemvMaxBatch)
    return invalid_argument("dense gemv: batch " + std::to_string(a.batch) + " (1.." + std::to_string(kDenseGemvMaxBatch) + " supported)");
  if (a.k == 0) return invalid_argument("dense gemv: k is 0");
  return Status::ok();
}

void dense_gemv_reference(const DenseGemvArgs& a) {
  for (uint32_t b = 0; b < a.batch; ++b)
    for (uint32_t r = 0; r < a.n; ++r) {
      float v = dot32(a.x + uint64_t(b) * a.k, a.w + uint64_t(r) * a.k, a.k);
      if (a.bias) v = v + bf16_to_f32(a.bias[r]);
      if (a.y_f32) a.y_f32[uint64_t(b) * a.n + r] = v;
      else a.y[uint64_t(b) * a.n + r] = bf16_output(v);
    }
}

Status check_moe_route(const MoeRouteArgs& a) {
  if (!a.x || !a.w || !a.logits || !a.weights || !a.ids) return invalid_argument("moe route: x, w, logits, weights and ids must not be NULL");
  if (a.experts == 0 || a.experts > kMoeRouteMaxExperts)
    return invalid_argument("moe route: " + std::to_string(a.experts) + " experts (1.." + std::to_string(kMoeRouteMaxExperts) + " supported)");
  if (a.top_k == 0 || a.top_k > a.experts || a.top_k > kMoeRouteMaxTopK)
    return invalid_argument("moe route: top_k " + std::to_string(a.top_k) + " with " + std::to_string(a.experts) + " experts (1..min(experts, " +
                            std::to_string(kMoeRouteMaxTopK) + ") supported)");
  if (a.k == 0) return invalid_argument("moe route: k is 0");
  return Status::ok();
}

void moe_route_reference(const MoeRouteArgs& a) {
  for (uint32_t r = 0; r < a.rows; ++r) {
    const uint16_t* x = a.x + uint64_t(r) * a.k;
    uint16_t* logits = a.logits + uint64_t(r) * a.experts;
    std::vector<int32_t> keys(a.experts);
    for (uint32_t e = 0; e < a.experts; ++e) {
      float v = router_logit(x, a.w + uint64_t(e) * a.k, a.k);
      if (a.bias) v = v + bf16_to_f32(a.bias[e]);
      logits[e] = bf16_output(v);
      keys[e] = topk_key(logits[e]);
    }
    std::vector<uint32_t> picked;
    for (uint32_t t = 0; t < a.top_k; ++t) {
      uint32_t best = 0;
      int32_t best_key = INT32_MIN;
      bool found = false;
      for (uint32_t e = 0; e < a.experts; ++e)
        if (keys[e] != INT32_MIN && (!found || keys[e] > best_key)) best = e, best_key = keys[e], found = true;
      keys[best] = INT32_MIN;
      picked.push_back(best);
    }
    const float top = bf16_to_f32(logits[picked[0]]);
    std::vector<float> e(a.top_k);
    float sum = 0.0f;
    for (uint32_t t = 0; t < a.top_k; ++t) {
      e[t] = exp_same_bits(bf16_to_f32(logits[picked[t]]) - top);
      sum = sum + e[t];
    }
    for (uint32_t t = 0; t < a.top_k; ++t) {
      a.weights[uint64_t(r) * a.top_k + t] = bf16_output(e[t] / sum);
      a.ids[uint64_t(r) * a.top_k + t] = int32_t(picked[t]);
    }
  }
}

Status check_attention_decode(const AttentionDecodeArgs& a) {
  if (!a.q || !a.k_cache || !a.v_cache || !a.pos || !a.out) return invalid_argument("attention: q, k_cache, v_cache, pos and out must not be NULL");
  if (a.heads == 0 || a.kv_heads == 0 || a.heads % a.kv_heads != 0)
    return invalid_argument("attention: " + std::to_string(a.heads) + " query heads over " + std::to_string(a.kv_heads) +
                            " key/value heads (must be a positive multiple)");
  if (a.head_dim == 0 || a.head_dim > kAttentionMaxHeadDim)
    return invalid_argument("attention: head_dim " + std::to_string(a.head_dim) + " (1.." + std::to_string(kAttentionMaxHeadDim) + " supported)");
  if (a.max_len == 0) return invalid_argument("attention: max_len is 0");
  if (!a.cos != !a.sin) return invalid_argument("attention: cos and sin go together");
  if (a.cos && a.head_dim % 2) return invalid_argument("attention: rotary positions need an even head_dim, not " + std::to_string(a.head_dim));
  if (!a.k_new != !a.v_new) return invalid_argument("attention: k_new and v_new go together");
  return Status::ok();
}

namespace {

// Row `row` of x [rows, D] rotated to position pos (rope_element) into out.
void rotate_row(const uint16_t* x, const AttentionDecodeArgs& a, int64_t pos, uint16_t* out) {
  const uint32_t D = a.head_dim, half = D / 2;
  const uint16_t* c = a.cos + uint64_t(pos) * D;
  const uint16_t* s = a.sin + uint64_t(pos) * D;
  for (uint32_t d = 0; d < D; ++d) {
    const uint32_t partner = d < half ? d + half : d - half;
    out[d] = bf16_output(rope_element(bf16_to_f32(x[d]), bf16_to_f32(x[partner]), d < half, bf16_to_f32(c[d]), bf16_to_f32(s[d])));
  }
}

}  // namespace

void attention_decode_reference(const AttentionDecodeArgs& a) {
  const uint32_t D = a.head_dim, groups = a.heads / a.kv_heads;
  const int64_t pos = *a.pos;
  // Rotary positions and the cache write first; then the plain algorithm on their results.
  std::vector<uint16_t> q_rotated;
  if ((a.cos || a.k_new) && pos >= 0 && pos < int64_t(a.max_len)) {
    if (a.cos) {
      q_rotated.resize(size_t(a.heads) * D);
      for (uint32_t h = 0; h < a.heads; ++h) rotate_row(a.q + uint64_t(h) * D, a, pos, q_rotated.data() + uint64_t(h) * D);
    }
    if (a.k_new)
      for (uint32_t kv = 0; kv < a.kv_heads; ++kv) {
        uint16_t* k_row = const_cast<uint16_t*>(a.k_cache) + (uint64_t(kv) * a.max_len + uint64_t(pos)) * D;
        uint16_t* v_row = const_cast<uint16_t*>(a.v_cache) + (uint64_t(kv) * a.max_len + uint64_t(pos)) * D;
        if (a.cos) rotate_row(a.k_new + uint64_t(kv) * D, a, pos, k_row);
        else std::copy(a.k_new + uint64_t(kv) * D, a.k_new + uint64_t(kv + 1) * D, k_row);
        std::copy(a.v_new + uint64_t(kv) * D, a.v_new + uint64_t(kv + 1) * D, v_row);
      }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (uint32_t h = 0; h < a.heads; ++h) {
    uint16_t* out = a.out + uint64_t(h) * D;
    if (pos < 0 || pos >= int64_t(a.max_len)) {
      for (uint32_t d = 0; d < D; ++d) out[d] = bf16_output(nan);
      continue;
    }
    const int64_t lo = a.window ? std::max<int64_t>(0, pos - int64_t(a.window) + 1) : 0;
    const uint64_t kv_base = uint64_t(h / groups) * a.max_len * D;
    const uint16_t* q = (q_rotated.empty() ? a.q : q_rotated.data()) + uint64_t(h) * D;
    std::array<float, kAttentionWarps> m, l;
    std::vector<std::vector<float>> acc(kAttentionWarps, std::vector<float>(D, 0.0f));
    m.fill(neg_inf);
    l.fill(0.0f);
    const int64_t round = int64_t(kAttentionWarps) * kAttentionUnroll;
    for (int w = 0; w < kAttentionWarps; ++w) {
      for (int64_t base = lo + int64_t(w) * kAttentionUnroll; base <= pos; base += round) {
        const int n = int(std::min<int64_t>(kAttentionUnroll, pos - base + 1));
        std::array<float, kAttentionUnroll> score{};
        float m_new = m[w];
        for (int u = 0; u < n; ++u) {
          const uint16_t* kr = a.k_cache + kv_base + uint64_t(base + u) * D;
          std::array<float, 32> s{};
          for (uint32_t lane = 0; lane < 32; ++lane) {
            float dot = 0.0f;
            for (uint32_t d = lane; d < D; d += 32) dot = fmaf(bf16_to_f32(q[d]), bf16_to_f32(kr[d]), dot);
            s[lane] = dot;
          }
          score[u] = butterfly32(s) * a.scale;
          m_new = score[u] > m_new ? score[u] : m_new;
        }
        const float c = exp_same_bits(m[w] - m_new);
        std::array<float, kAttentionUnroll> p{};
        for (int u = 0; u < n; ++u) p[u] = exp_same_bits(score[u] - m_new);
        l[w] = fmaf(l[w], c, p[0]);
        for (int u = 1; u < n; ++u) l[w] = l[w] + p[u];
        for (uint32_t d = 0; d < D; ++d) {
          float o = acc[w][d] * c;
          for (int u = 0; u < n; ++u) o = fmaf(p[u], bf16_to_f32(a.v_cache[kv_base + uint64_t(base + u) * D + d]), o);
          acc[w][d] = o;
        }
        m[w] = m_new;
      }
    }
    float M = m[0];
    for (int w = 1; w < kAttentionWarps; ++w) M = m[w] > M ? m[w] : M;
    const float sink = a.sinks ? bf16_to_f32(a.sinks[h]) : neg_inf;
    if (a.sinks) M = sink > M ? sink : M;
    std::array<float, kAttentionWarps> c;
    float L = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
      c[w] = exp_same_bits(m[w] - M);
      L = fmaf(l[w], c[w], L);
    }
    if (a.sinks) L = L + exp_same_bits(sink - M);
    for (uint32_t d = 0; d < D; ++d) {
      float o = 0.0f;
      for (int w = 0; w < kAttentionWarps; ++w) o = fmaf(acc[w][d], c[w], o);
      out[d] = bf16_output(o / L);
    }
  }
}

Status check_residual_norm(const ResidualNormArgs& a) {
  if (!a.x || !a.y || !a.norm_w || !a.x_out || !a.h_out)
    return invalid_argument("residual norm: x, y, norm_w, x_out and h_out must not be NULL");
  if (a.n == 0 || a.n > kResidualNormMaxN)
    return invalid_argument("residual norm: n " + std::to_string(a.n) + " (1.." + std::to_string(kResidualNormMaxN) + " supported)");
  if (a.terms == 0) return invalid_argument("residual norm: terms is 0 (one term at least)");
  if (a.bias && (!a.ids || a.bias_rows == 0)) return invalid_argument("residual norm: a bias needs ids and bias_rows > 0");
  if (!(a.eps >= 0.0f) || !std::isfinite(a.eps)) return invalid_argument("residual norm: eps must be finite and >= 0");
  return Status::ok();
}

void residual_norm_reference(const ResidualNormArgs& a) {
  const uint32_t n = a.n;
  std::vector<float> xo(n);
  for (uint32_t r = 0; r < a.rows; ++r) {
    const uint64_t row = uint64_t(r) * n;
    for (uint32_t i = 0; i < n; ++i) {
      float s = 0.0f;
      for (uint32_t t = 0; t < a.terms; ++t) {
        const uint64_t rt = uint64_t(r) * a.terms + t;
        float b = 0.0f;
        if (a.bias) {
          const int32_t id = a.ids[rt];
          b = id >= 0 && uint32_t(id) < a.bias_rows ? bf16_to_f32(a.bias[uint64_t(id) * n + i]) : f32_from_bits(kCanonicalNanBits);
        }
        const float v = residual_term(bf16_to_f32(a.y[rt * n + i]), a.bias != nullptr, b, a.weights != nullptr,
                                      a.weights ? bf16_to_f32(a.weights[rt]) : 0.0f);
        s = t == 0 ? v : s + v;
      }
      xo[i] = bf16_round(bf16_to_f32(a.x[row + i]) + bf16_round(s));
    }
    // The sum of squares in the kernel's order: per thread, per warp, then the warps.
    std::array<float, kResidualNormThreads> part{};
    const uint32_t chunks = (n + 7) / 8;
    for (int j = 0; j < kResidualNormThreads; ++j)
      for (uint32_t c = uint32_t(j); c < chunks; c += kResidualNormThreads)
        for (uint32_t i = 8 * c; i < std::min(8 * c + 8, n); ++i) part[j] = fmaf(xo[i], xo[i], part[j]);
    const float inv = 1.0f / std::sqrt(block_sum(part) / float(n) + a.eps);
    for (uint32_t i = 0; i < n; ++i) {
      a.x_out[row + i] = bf16_output(xo[i]);
      a.h_out[row + i] = rms_norm_output(xo[i] * inv, bf16_to_f32(a.norm_w[i]), a.weight_in_f32);
    }
  }
}

Status check_expert_swiglu(const ExpertSwigluArgs& a) {
  if (a.n % 2) return invalid_argument("expert swiglu: N " + std::to_string(a.n) + " is odd (gate and up rows come in pairs)");
  if (a.bias && (!a.ids || a.bias_rows == 0)) return invalid_argument("expert swiglu: a bias needs ids and bias_rows > 0");
  if (!std::isfinite(a.alpha)) return invalid_argument("expert swiglu: alpha must be finite");
  if (!(a.limit >= 0.0f)) return invalid_argument("expert swiglu: limit must be >= 0 (infinity: no clamp)");
  return Status::ok();
}

void expert_swiglu_reference(const ExpertSwigluArgs& a) {
  const uint64_t half = a.n / 2;
  for (uint64_t p = 0; p < a.pairs; ++p) {
    const uint16_t* bias = nullptr;
    bool bad = false;
    if (a.bias) {
      const int32_t id = a.ids[p];
      bad = id < 0 || uint32_t(id) >= a.bias_rows;
      if (!bad) bias = a.bias + uint64_t(id) * a.n;
    }
    for (uint64_t j = 0; j < half; ++j) {
      const uint16_t* gu = a.gate_up + p * a.n + 2 * j;
      a.out[p * half + j] = bad ? uint16_t(kCanonicalNanBits >> 16)
                                : clamped_swiglu(bf16_to_f32(gu[0]), bf16_to_f32(gu[1]), bias != nullptr,
                                                 bias ? bf16_to_f32(bias[2 * j]) : 0.0f, bias ? bf16_to_f32(bias[2 * j + 1]) : 0.0f,
                                                 a.alpha, a.limit);
    }
  }
}

Status check_gated_silu(const GatedSiluArgs& a) {
  if (a.rows == 0 || a.n == 0) return Status::ok();
  if (!a.gate || !a.up || !a.out) return invalid_argument("gated silu: gate, up and out must not be NULL");
  if (a.rows > kGatedSiluMaxRows)
    return invalid_argument("gated silu: " + std::to_string(a.rows) + " rows (at most " + std::to_string(kGatedSiluMaxRows) + " a launch)");
  if (a.n > (uint64_t(1) << 40) || a.gate_stride > (uint64_t(1) << 40) || a.up_stride > (uint64_t(1) << 40))
    return invalid_argument("gated silu: n or a stride over 2^40 elements");
  if (a.rows > 1 && (a.gate_stride < a.n || a.up_stride < a.n))
    return invalid_argument("gated silu: a row stride (gate " + std::to_string(a.gate_stride) + ", up " + std::to_string(a.up_stride) +
                            ") is below n " + std::to_string(a.n) + ": rows would overlap");
  // out is written while gate and up are read by other threads: it must not alias either.
  const auto span = [&](const uint16_t* p, uint64_t stride) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    return std::pair<uintptr_t, uintptr_t>(lo, lo + 2 * ((a.rows - 1) * stride + a.n));
  };
  const auto out = span(a.out, a.n);
  for (const auto& in : {span(a.gate, a.gate_stride), span(a.up, a.up_stride)})
    if (in.first < out.second && out.first < in.second) return invalid_argument("gated silu: out overlaps gate or up");
  if (a.clear_inputs) {
    // Each element is zeroed by the one thread that reads it, so no element may be both a gate
    // and an up element: the two spans apart, or rows of one stride interleaved without overlap
    // (the gated expert launch's exchange: gate then up in each row of 2n).
    const auto g = span(a.gate, a.gate_stride), u = span(a.up, a.up_stride);
    const uintptr_t lo = std::min(g.first, u.first), hi = std::max(g.first, u.first);
    const uint64_t d = (hi - lo) / 2;  // elements from the lower to the higher
    const bool apart = g.second <= u.first || u.second <= g.first;
    const bool interleaved = a.gate_stride == a.up_stride && (hi - lo) % 2 == 0 && d >= a.n && d + a.n <= a.gate_stride;
    if (!apart && !interleaved) return invalid_argument("gated silu: clearing its inputs needs gate and up to share no element");
  }
  return Status::ok();
}

void gated_silu_reference(const GatedSiluArgs& a) {
  for (uint64_t r = 0; r < a.rows; ++r)
    for (uint64_t i = 0; i < a.n; ++i)
      a.out[r * a.n + i] = silu_mul(bf16_to_f32(a.gate[r * a.gate_stride + i]), bf16_to_f32(a.up[r * a.up_stride + i]));
}

}  // namespace iris
