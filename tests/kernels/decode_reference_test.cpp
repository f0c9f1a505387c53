// The decode kernels' CPU references (kernels/decode_reference.cpp) against an independent
// oracle: double-precision sums and softmaxes, std::exp, and a stable sort for the top-k. The
// GPU kernels are then held to these references bit for bit (decode_ops_gpu_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "common/float_bits.h"
#include "kernels/decode_math.h"
#include "kernels/decode_ops.h"
#include "tests/kernels/decode_cases.h"

namespace iris {
namespace {

float ulp_of(float v) {
  const float a = std::fabs(v);
  return std::nextafter(a, INFINITY) - a;
}

TEST(ExpSameBits, WithinTwoUlpOfTheLibraryExpOverItsRange) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-87.3f, 88.7f);
  for (int i = 0; i < 200000; ++i) {
    const float x = i < 100000 ? -87.3f + float(i) * (176.0f / 100000.0f) : dist(rng);
    const float got = exp_same_bits(x);
    const double want = std::exp(double(x));
    if (want < 1.1754944e-38) continue;  // flushed: below FLT_MIN (checked below)
    ASSERT_LE(std::fabs(double(got) - want), 2.0 * ulp_of(float(want))) << "x = " << x;
  }
}

TEST(ExpSameBits, SpecialValues) {
  EXPECT_EQ(exp_same_bits(0.0f), 1.0f);
  EXPECT_EQ(exp_same_bits(-0.0f), 1.0f);
  EXPECT_EQ(exp_same_bits(-INFINITY), 0.0f);
  EXPECT_EQ(exp_same_bits(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(exp_same_bits(NAN)));
  EXPECT_EQ(exp_same_bits(-88.0f), 0.0f);   // below FLT_MIN: flushed
  EXPECT_EQ(exp_same_bits(89.0f), INFINITY);
  EXPECT_TRUE(std::isfinite(exp_same_bits(88.72f)));
  EXPECT_EQ(exp_same_bits(1e-40f), 1.0f);   // subnormal input
}

TEST(TopkKey, OrdersLikeTheValuesWithNanAboveAll) {
  const float values[] = {-INFINITY, -3.0f, -1e-30f, 0.0f, 1e-30f, 2.0f, INFINITY};
  for (size_t i = 0; i + 1 < std::size(values); ++i)
    EXPECT_LT(topk_key(f32_to_bf16(values[i])), topk_key(f32_to_bf16(values[i + 1]))) << values[i];
  EXPECT_EQ(topk_key(0x8000), topk_key(0x0000));  // -0 == +0
  EXPECT_GT(topk_key(0x7fc0), topk_key(0x7f80));  // NaN above +inf
  EXPECT_GT(topk_key(0xffc0), topk_key(0x7f80));  // negative NaN too
}

// ---- the router

void check_route_against_oracle(const test::RouteCase& c, uint32_t seed) {
  const auto d = test::make_route_data(c, seed);
  std::vector<uint16_t> logits(size_t(c.rows) * c.experts), weights(size_t(c.rows) * c.top_k);
  std::vector<int32_t> ids(weights.size());
  MoeRouteArgs a;
  a.x = d.x(), a.w = d.w.data(), a.bias = c.bias ? d.bias.data() : nullptr;
  a.rows = c.rows, a.experts = c.experts, a.k = c.k, a.top_k = c.top_k;
  a.logits = logits.data(), a.weights = weights.data(), a.ids = ids.data();
  ASSERT_TRUE(check_moe_route(a).is_ok());
  moe_route_reference(a);
  for (uint32_t r = 0; r < c.rows; ++r) {
    const uint16_t* x = d.x() + size_t(r) * c.k;
    for (uint32_t e = 0; e < c.experts; ++e) {
      double sum = 0, abs_sum = 0;
      for (uint32_t i = 0; i < c.k; ++i) {
        const double p = double(bf16_to_f32(x[i])) * bf16_to_f32(d.w[size_t(e) * c.k + i]);
        sum += p, abs_sum += std::fabs(p);
      }
      if (c.bias) sum += bf16_to_f32(d.bias[e]), abs_sum += std::fabs(bf16_to_f32(d.bias[e]));
      const float got = bf16_to_f32(logits[size_t(r) * c.experts + e]);
      if (std::isnan(sum) || std::isinf(sum)) {
        ASSERT_TRUE(std::isnan(got) ? std::isnan(sum) : got == float(sum)) << c.name << " expert " << e;
        continue;
      }
      const double bound = std::ldexp(std::fabs(sum), -8) + double(c.k + 1) * std::ldexp(abs_sum, -24) + 1e-38;
      ASSERT_LE(std::fabs(double(got) - sum), bound) << c.name << " row " << r << " expert " << e;
    }
    // The top-k by a stable sort of the reference's BF16 logits: NaN first, then larger, ties
    // to the lower index.
    std::vector<uint32_t> order(c.experts);
    std::iota(order.begin(), order.end(), 0u);
    auto value = [&](uint32_t e) { return bf16_to_f32(logits[size_t(r) * c.experts + e]); };
    std::stable_sort(order.begin(), order.end(), [&](uint32_t p, uint32_t q) {
      if (std::isnan(value(p)) || std::isnan(value(q))) return std::isnan(value(p)) && !std::isnan(value(q));
      return value(p) > value(q);
    });
    double denom = 0;
    std::vector<double> ex(c.top_k);
    for (uint32_t t = 0; t < c.top_k; ++t) {
      ASSERT_EQ(uint32_t(ids[size_t(r) * c.top_k + t]), order[t]) << c.name << " row " << r << " pick " << t;
      ex[t] = std::exp(double(value(order[t])) - double(value(order[0])));
      denom += ex[t];
    }
    for (uint32_t t = 0; t < c.top_k; ++t) {
      const double want = ex[t] / denom;
      const float got = bf16_to_f32(weights[size_t(r) * c.top_k + t]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << c.name << " pick " << t;
        continue;
      }
      ASSERT_LE(std::fabs(double(got) - want), std::ldexp(want, -8) + 1e-37) << c.name << " row " << r << " pick " << t;
    }
  }
}

TEST(MoeRouteReference, MatchesTheOracleOnEveryCase) {
  uint32_t seed = 100;
  for (const auto& c : test::route_cases()) {
    SCOPED_TRACE(c.name);
    check_route_against_oracle(c, seed += 10);
  }
}

TEST(MoeRouteReference, TiesGoToTheLowerIndex) {
  // Every logit equal: the picks are 0..top_k-1 and the weights uniform.
  test::RouteCase c{"all_equal", 1, 16, 32, 4, false, test::RouteCase::kZeroInput};
  const auto d = test::make_route_data(c, 1);
  std::vector<uint16_t> logits(16), weights(4);
  std::vector<int32_t> ids(4);
  MoeRouteArgs a;
  a.x = d.x(), a.w = d.w.data(), a.rows = 1, a.experts = 16, a.k = 32, a.top_k = 4;
  a.logits = logits.data(), a.weights = weights.data(), a.ids = ids.data();
  moe_route_reference(a);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(ids[t], t);
    EXPECT_EQ(bf16_to_f32(weights[t]), 0.25f);
  }
}

TEST(MoeRouteReference, RejectsBadArguments) {
  uint16_t buf[64] = {};
  int32_t ids[4] = {};
  MoeRouteArgs a;
  a.x = buf, a.w = buf, a.logits = buf, a.weights = buf, a.ids = ids, a.rows = 1, a.experts = 8, a.k = 8, a.top_k = 2;
  EXPECT_TRUE(check_moe_route(a).is_ok());
  auto bad = [&](auto change) {
    MoeRouteArgs b = a;
    change(b);
    return !check_moe_route(b).is_ok();
  };
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.x = nullptr; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.experts = 0; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.experts = kMoeRouteMaxExperts + 1; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.top_k = 0; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.top_k = 9; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.experts = 64, b.top_k = kMoeRouteMaxTopK + 1; }));
  EXPECT_TRUE(bad([](MoeRouteArgs& b) { b.k = 0; }));
}

// ---- the dense GEMV

TEST(DenseGemvReference, MatchesTheOracleOnEveryCase) {
  uint32_t seed = 900;
  for (const auto& c : test::dense_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_dense_data(c, seed += 10);
    const auto& w = d.w;
    const auto& bias = d.bias;
    std::vector<uint16_t> y(size_t(c.batch) * c.n);
    DenseGemvArgs a;
    a.w = w.data(), a.bias = c.bias ? bias.data() : nullptr, a.x = d.x(), a.n = c.n, a.k = c.k, a.batch = c.batch;
    a.y = y.data();
    ASSERT_TRUE(check_dense_gemv(a).is_ok());
    dense_gemv_reference(a);
    for (uint32_t b = 0; b < c.batch; ++b)
      for (uint32_t r = 0; r < c.n; ++r) {
        double sum = 0, abs_sum = 0;
        for (uint32_t i = 0; i < c.k; ++i) {
          const double p = double(bf16_to_f32(a.x[size_t(b) * c.k + i])) * bf16_to_f32(w[size_t(r) * c.k + i]);
          sum += p, abs_sum += std::fabs(p);
        }
        if (c.bias) sum += bf16_to_f32(bias[r]);
        const float got = bf16_to_f32(y[size_t(b) * c.n + r]);
        if (std::isinf(sum)) {
          ASSERT_EQ(got, float(sum)) << "row " << r;
          continue;
        }
        ASSERT_LE(std::fabs(double(got) - sum), std::ldexp(std::fabs(sum), -8) + double(c.k + 1) * std::ldexp(abs_sum, -24) + 1e-38)
            << "batch " << b << " row " << r;
      }
  }
}

TEST(DenseGemvReference, RejectsBadArguments) {
  uint16_t buf[16] = {};
  DenseGemvArgs a;
  a.w = a.x = buf, a.y = buf, a.n = 1, a.k = 8, a.batch = 1;
  EXPECT_TRUE(check_dense_gemv(a).is_ok());
  DenseGemvArgs b = a;
  b.batch = 0;
  EXPECT_FALSE(check_dense_gemv(b).is_ok());
  b.batch = kDenseGemvMaxBatch + 1;
  EXPECT_FALSE(check_dense_gemv(b).is_ok());
  b = a, b.k = 0;
  EXPECT_FALSE(check_dense_gemv(b).is_ok());
  b = a, b.y = nullptr;
  EXPECT_FALSE(check_dense_gemv(b).is_ok());
  float f32[16] = {};
  b = a, b.y_f32 = f32;  // both outputs
  EXPECT_FALSE(check_dense_gemv(b).is_ok());
  b.y = nullptr;  // the FP32 one alone
  EXPECT_TRUE(check_dense_gemv(b).is_ok());
}

// The FP32 output (y_f32, a model's logits): within the FP32 sums' own bound of the exact
// dot product (no BF16 rounding), and rounding it to BF16 gives the BF16 output bit for bit.
TEST(DenseGemvReference, F32OutputIsTheUnroundedSum) {
  uint32_t seed = 1900;
  for (const auto& c : test::dense_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_dense_data(c, seed += 10);
    std::vector<uint16_t> y(size_t(c.batch) * c.n);
    std::vector<float> y32(y.size());
    DenseGemvArgs a;
    a.w = d.w.data(), a.bias = c.bias ? d.bias.data() : nullptr, a.x = d.x(), a.n = c.n, a.k = c.k, a.batch = c.batch;
    a.y = y.data();
    dense_gemv_reference(a);
    a.y = nullptr, a.y_f32 = y32.data();
    ASSERT_TRUE(check_dense_gemv(a).is_ok());
    dense_gemv_reference(a);
    for (uint32_t b = 0; b < c.batch; ++b)
      for (uint32_t r = 0; r < c.n; ++r) {
        const size_t at = size_t(b) * c.n + r;
        double sum = 0, abs_sum = 0;
        for (uint32_t i = 0; i < c.k; ++i) {
          const double p = double(bf16_to_f32(a.x[size_t(b) * c.k + i])) * bf16_to_f32(d.w[size_t(r) * c.k + i]);
          sum += p, abs_sum += std::fabs(p);
        }
        if (c.bias) sum += bf16_to_f32(d.bias[r]), abs_sum += std::fabs(bf16_to_f32(d.bias[r]));
        // The largest magnitude any FP32 partial sum can reach (the terms' sum, grown by rounding).
        const double reach = abs_sum * (1 + std::ldexp(double(c.k + 1), -24));
        if (std::isnan(y32[at])) {
          ASSERT_TRUE(std::isnan(bf16_to_f32(y[at]))) << "batch " << b << " row " << r;
          ASSERT_TRUE(std::isnan(sum) || reach >= double(FLT_MAX)) << "a NaN from a sum within FP32's range, batch " << b << " row " << r;
          continue;
        }
        ASSERT_EQ(f32_to_bf16(y32[at]), y[at]) << "batch " << b << " row " << r;
        if (std::isinf(y32[at])) {  // an FP32 overflow: possible only where a partial sum can pass FP32's range
          ASSERT_GE(reach, double(FLT_MAX)) << "batch " << b << " row " << r;
          continue;
        }
        if (std::isinf(sum)) continue;
        ASSERT_LE(std::fabs(double(y32[at]) - sum), double(c.k + 1) * std::ldexp(abs_sum, -24) + 1e-38) << "batch " << b << " row " << r;
      }
  }
}

// ---- attention

void check_attention_against_oracle(const test::AttentionCase& c, uint32_t seed) {
  const auto d = test::make_attention_data(c, seed);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  for (int64_t pos : c.positions) {
    std::vector<uint16_t> out(size_t(c.heads) * c.head_dim);
    AttentionDecodeArgs a;
    a.q = d.q.data(), a.k_cache = d.k.data(), a.v_cache = d.v.data(), a.pos = &pos;
    a.sinks = c.sinks ? d.sinks.data() : nullptr;
    a.heads = c.heads, a.kv_heads = c.kv_heads, a.head_dim = c.head_dim, a.max_len = c.max_len, a.window = c.window;
    a.scale = scale, a.out = out.data();
    ASSERT_TRUE(check_attention_decode(a).is_ok());
    attention_decode_reference(a);
    const uint32_t D = c.head_dim, groups = c.heads / c.kv_heads;
    for (uint32_t h = 0; h < c.heads; ++h) {
      if (pos < 0 || pos >= int64_t(c.max_len)) {
        for (uint32_t i = 0; i < D; ++i) ASSERT_TRUE(std::isnan(bf16_to_f32(out[size_t(h) * D + i]))) << "pos " << pos;
        continue;
      }
      const int64_t lo = c.window ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      const size_t base = size_t(h / groups) * c.max_len * D;
      std::vector<double> s;
      double M = -INFINITY, score_error = 0;  // the FP32 dot products' error bound, the largest
      for (int64_t j = lo; j <= pos; ++j) {
        double dot = 0, abs_dot = 0;
        for (uint32_t i = 0; i < D; ++i) {
          const double p = double(bf16_to_f32(d.q[size_t(h) * D + i])) * bf16_to_f32(d.k[base + size_t(j) * D + i]);
          dot += p, abs_dot += std::fabs(p);
        }
        s.push_back(dot * scale);
        M = std::max(M, s.back());
        score_error = std::max(score_error, double(D + 2) * std::ldexp(abs_dot * scale, -24));
      }
      const double sink = c.sinks ? bf16_to_f32(d.sinks[h]) : -INFINITY;
      if (c.sinks) M = std::isnan(sink) ? sink : std::max(M, sink);
      double L = c.sinks ? std::exp(sink - M) : 0.0, vmax = 0;
      std::vector<double> o(D, 0.0);
      for (size_t t = 0; t < s.size(); ++t) {
        const double p = std::exp(s[t] - M);
        L += p;
        for (uint32_t i = 0; i < D; ++i) {
          const double v = bf16_to_f32(d.v[base + size_t(lo + int64_t(t)) * D + i]);
          o[i] += p * v, vmax = std::max(vmax, std::fabs(v));
        }
      }
      for (uint32_t i = 0; i < D; ++i) {
        const double want = o[i] / L;
        const float got = bf16_to_f32(out[size_t(h) * D + i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << c.name << " pos " << pos << " head " << h;
          continue;
        }
        // BF16 rounding, FP32 sums, and each weight off by up to e^(2 score_error) - 1
        const double bound = std::ldexp(std::fabs(want), -8) + std::ldexp(vmax, -14) + 2.5 * score_error * vmax;
        ASSERT_LE(std::fabs(double(got) - want), bound)
            << c.name << " pos " << pos << " head " << h << " dim " << i;
      }
    }
  }
}

TEST(AttentionDecodeReference, MatchesTheOracleOnEveryCase) {
  uint32_t seed = 500;
  for (const auto& c : test::attention_cases()) {
    SCOPED_TRACE(c.name);
    check_attention_against_oracle(c, seed += 10);
  }
}

// Row x [D] rotated as decode_ops.h states it, written here apart from the library: the
// product x * cos exact in FP32, the sum fused (std::fma), one rounding to BF16. Also held
// against FP64 arithmetic: within that BF16 rounding and the FP32 one before it.
std::vector<uint16_t> rotate_for_test(const uint16_t* x, const uint16_t* c, const uint16_t* s, uint32_t D) {
  std::vector<uint16_t> out(D);
  const uint32_t half = D / 2;
  for (uint32_t d = 0; d < D; ++d) {
    const float xd = bf16_to_f32(x[d]), partner = bf16_to_f32(x[d < half ? d + half : d - half]);
    const float r = d < half ? -partner : partner, cd = bf16_to_f32(c[d]), sd = bf16_to_f32(s[d]);
    out[d] = f32_to_bf16(std::fma(r, sd, xd * cd));
    const double exact = double(xd) * cd + double(r) * sd;
    EXPECT_LE(std::fabs(double(bf16_to_f32(out[d])) - exact), std::ldexp(std::fabs(exact), -8) * 1.0001 + 1e-38) << "dim " << d;
  }
  return out;
}

TEST(AttentionDecodeReference, RotaryAndCacheWriteEqualThemDoneFirst) {
  uint32_t seed = 700;
  int checked = 0;
  for (const auto& c : test::attention_cases()) {
    if (c.head_dim % 2) continue;  // rotary positions need an even head_dim (refused: RejectsBadArguments)
    SCOPED_TRACE(c.name);
    const auto d = test::make_attention_data(c, seed += 10);
    const auto r = test::make_rope_data(c, seed);
    const uint32_t D = c.head_dim;
    for (int64_t pos : c.positions) {
      const size_t n_out = size_t(c.heads) * D;
      std::vector<uint16_t> got(n_out), want(n_out), k_got = d.k, v_got = d.v, k_want = d.k, v_want = d.v, q_want(n_out);
      AttentionDecodeArgs a;
      a.q = d.q.data(), a.k_cache = k_got.data(), a.v_cache = v_got.data(), a.pos = &pos, a.sinks = c.sinks ? d.sinks.data() : nullptr;
      a.heads = c.heads, a.kv_heads = c.kv_heads, a.head_dim = D, a.max_len = c.max_len, a.window = c.window;
      a.scale = 1.0f / std::sqrt(float(D)), a.out = got.data();
      a.cos = r.cos.data(), a.sin = r.sin.data(), a.k_new = r.k_new.data(), a.v_new = r.v_new.data();
      ASSERT_TRUE(check_attention_decode(a).is_ok());
      attention_decode_reference(a);
      AttentionDecodeArgs plain = a;  // the same step done first by hand, then the plain reference
      plain.cos = plain.sin = plain.k_new = plain.v_new = nullptr;
      plain.q = q_want.data(), plain.k_cache = k_want.data(), plain.v_cache = v_want.data(), plain.out = want.data();
      if (pos >= 0 && pos < int64_t(c.max_len)) {
        const uint16_t *cs = r.cos.data() + size_t(pos) * D, *sn = r.sin.data() + size_t(pos) * D;
        for (uint32_t h = 0; h < c.heads; ++h) {
          const auto q = rotate_for_test(d.q.data() + size_t(h) * D, cs, sn, D);
          std::copy(q.begin(), q.end(), q_want.begin() + size_t(h) * D);
        }
        for (uint32_t kv = 0; kv < c.kv_heads; ++kv) {
          const auto k = rotate_for_test(r.k_new.data() + size_t(kv) * D, cs, sn, D);
          const size_t row = (size_t(kv) * c.max_len + size_t(pos)) * D;
          std::copy(k.begin(), k.end(), k_want.begin() + row);
          std::copy(r.v_new.begin() + size_t(kv) * D, r.v_new.begin() + size_t(kv + 1) * D, v_want.begin() + row);
        }
      }
      attention_decode_reference(plain);
      EXPECT_EQ(got, want) << "pos " << pos;
      EXPECT_EQ(k_got, k_want) << "pos " << pos;
      EXPECT_EQ(v_got, v_want) << "pos " << pos;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(AttentionDecodeReference, RejectsBadArguments) {
  uint16_t buf[64] = {};
  int64_t pos = 0;
  AttentionDecodeArgs a;
  a.q = buf, a.k_cache = buf, a.v_cache = buf, a.pos = &pos, a.out = buf, a.heads = 4, a.kv_heads = 2, a.head_dim = 8, a.max_len = 2;
  EXPECT_TRUE(check_attention_decode(a).is_ok());
  auto bad = [&](auto change) {
    AttentionDecodeArgs b = a;
    change(b);
    return !check_attention_decode(b).is_ok();
  };
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.pos = nullptr; }));
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.kv_heads = 3; }));
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.kv_heads = 0; }));
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.head_dim = 0; }));
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.head_dim = kAttentionMaxHeadDim + 1; }));
  EXPECT_TRUE(bad([](AttentionDecodeArgs& b) { b.max_len = 0; }));
  EXPECT_TRUE(bad([&](AttentionDecodeArgs& b) { b.cos = buf; }));                   // no sin
  EXPECT_TRUE(bad([&](AttentionDecodeArgs& b) { b.cos = b.sin = buf, b.head_dim = 7; }));  // odd head_dim
  EXPECT_TRUE(bad([&](AttentionDecodeArgs& b) { b.k_new = buf; }));                 // no v_new
  EXPECT_FALSE(bad([&](AttentionDecodeArgs& b) { b.cos = b.sin = buf, b.k_new = b.v_new = buf; }));
}

// ---- the residual step and RMSNorm

// The case's arguments over host buffers (x_out and h_out sized by the caller).
ResidualNormArgs residual_norm_args(const test::ResidualNormCase& c, test::ResidualNormData& d, uint16_t* x_out, uint16_t* h_out) {
  ResidualNormArgs a;
  a.x = d.x(), a.y = d.y.data(), a.norm_w = d.norm_w.data(), a.rows = c.rows, a.terms = c.terms, a.n = c.n;
  a.bias = c.bias_rows ? d.bias.data() : nullptr, a.ids = c.bias_rows ? d.ids.data() : nullptr, a.bias_rows = c.bias_rows;
  a.weights = c.weights ? d.weights.data() : nullptr, a.eps = d.eps, a.weight_in_f32 = c.weight_in_f32;
  a.x_out = x_out, a.h_out = h_out;
  return a;
}

// Row r of the reference's outputs against FP64 arithmetic: x' within the BF16 roundings of
// x + sum_t w_t (y_t + b_t) (four roundings of at most 2^-8 relative each -- BF16 keeps 8
// significant bits -- on the terms' magnitudes), and h within two BF16 roundings (plus the
// FP32 sum's and square root's few ulps) of norm_w x' / sqrt(mean(x'^2) + eps), computed from
// the reference's own x' so that the two checks are independent.
void expect_row_near_oracle(const test::ResidualNormCase& c, const test::ResidualNormData& d, const std::vector<uint16_t>& x_out,
                            const std::vector<uint16_t>& h_out, uint32_t r) {
  const uint64_t row = uint64_t(r) * c.n;
  double squares = 0;
  for (uint32_t i = 0; i < c.n; ++i) {
    double want = bf16_to_f32(d.x()[row + i]), magnitude = std::fabs(want);
    for (uint32_t t = 0; t < c.terms; ++t) {
      const uint64_t rt = uint64_t(r) * c.terms + t;
      double v = bf16_to_f32(d.y[rt * c.n + i]);
      if (c.bias_rows) v += bf16_to_f32(d.bias[uint64_t(d.ids[rt]) * c.n + i]);
      if (c.weights) v *= bf16_to_f32(d.weights[rt]);
      want += v, magnitude += std::fabs(v);
    }
    const double got = bf16_to_f32(x_out[row + i]);
    ASSERT_LE(std::fabs(got - want), std::ldexp(magnitude, -6) + 1e-38) << "x' row " << r << " element " << i;
    squares += got * got;
  }
  const double inv = 1.0 / std::sqrt(squares / c.n + double(d.eps));
  for (uint32_t i = 0; i < c.n; ++i) {
    const double want = double(bf16_to_f32(d.norm_w[i])) * bf16_to_f32(x_out[row + i]) * inv;
    ASSERT_LE(std::fabs(bf16_to_f32(h_out[row + i]) - want), (std::ldexp(1.0, -7) + std::ldexp(1.0, -14)) * std::fabs(want) + 1e-37) << "h row " << r << " element " << i;
  }
}

TEST(ResidualNormReference, MatchesTheOracleOnEveryCase) {
  uint32_t seed = 1300;
  for (const auto& c : test::residual_norm_cases()) {
    SCOPED_TRACE(c.name);
    auto d = test::make_residual_norm_data(c, seed += 10);
    const size_t xn = size_t(c.rows) * c.n;
    std::vector<uint16_t> x_out(xn), h_out(xn);
    ResidualNormArgs a = residual_norm_args(c, d, x_out.data(), h_out.data());
    ASSERT_TRUE(check_residual_norm(a).is_ok());
    residual_norm_reference(a);
    const auto all = [&](uint32_t r, auto pred) {
      for (uint32_t i = 0; i < c.n; ++i)
        if (!pred(bf16_to_f32(x_out[size_t(r) * c.n + i]), bf16_to_f32(h_out[size_t(r) * c.n + i]), i)) return false;
      return true;
    };
    using H = test::ResidualNormCase;
    switch (c.hostile) {
      case H::kNone:
      case H::kTiny:
        for (uint32_t r = 0; r < c.rows; ++r) expect_row_near_oracle(c, d, x_out, h_out, r);
        break;
      case H::kNanTerm:  // row 0: x'[7] NaN, so its norm and every h NaN; row 1 untouched
        EXPECT_TRUE(std::isnan(bf16_to_f32(x_out[7])));
        EXPECT_TRUE(all(0, [](float, float h, uint32_t) { return std::isnan(h); }));
        expect_row_near_oracle(c, d, x_out, h_out, 1);
        break;
      case H::kInfTerm:  // x'[3] infinite: the sum of squares +inf, 1 / sqrt(inf) = 0, so h[3] = inf * 0 = NaN, the rest +-0
        EXPECT_TRUE(std::isinf(bf16_to_f32(x_out[3])));
        EXPECT_TRUE(all(0, [](float, float h, uint32_t i) { return i == 3 ? std::isnan(h) : h == 0.0f; }));
        break;
      case H::kHuge:  // squares past FP32's range: the row normalizes to zeros (as transformers' FP32 norm does)
        EXPECT_TRUE(all(0, [](float x, float h, uint32_t) { return std::fabs(x) > 1e30f && h == 0.0f; }));
        break;
      case H::kZero:  // 0 * (1 / sqrt(eps)) = 0
        EXPECT_TRUE(all(0, [](float x, float h, uint32_t) { return x == 0.0f && h == 0.0f; }));
        break;
      case H::kZeroNoEps:  // 0 * (1 / sqrt(0)) = 0 * inf = NaN
        EXPECT_TRUE(all(0, [](float x, float h, uint32_t) { return x == 0.0f && std::isnan(h); }));
        break;
      case H::kBadId:  // an id past the bias rows (row 0) and a negative one (row 1): both rows NaN
        for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(all(r, [](float x, float h, uint32_t) { return std::isnan(x) && std::isnan(h); })) << r;
        break;
    }
  }
}

TEST(ResidualNormReference, OneTermIsTheBf16SumAndTheOutputsAreCanonical) {
  // terms 1, no bias or weights: x' is x + y rounded once to BF16, what torch's BF16 add gives
  const test::ResidualNormCase c{"plain", 1, 1, 64, 0, false, false};
  auto d = test::make_residual_norm_data(c, 77);
  d.y[5] = 0xffc1;  // a NaN with a payload: the output is the canonical 0x7fc0
  std::vector<uint16_t> x_out(64), h_out(64);
  ResidualNormArgs a = residual_norm_args(c, d, x_out.data(), h_out.data());
  residual_norm_reference(a);
  for (uint32_t i = 0; i < 64; ++i) {
    if (i == 5) continue;
    EXPECT_EQ(x_out[i], f32_to_bf16(bf16_to_f32(d.x()[i]) + bf16_to_f32(d.y[i]))) << i;
  }
  EXPECT_EQ(x_out[5], 0x7fc0);
  for (uint16_t h : h_out) EXPECT_EQ(h, 0x7fc0);
}

TEST(ResidualNormReference, InPlaceEqualsOutOfPlace) {
  const auto c = test::residual_norm_cases()[0];
  auto d = test::make_residual_norm_data(c, 91);
  std::vector<uint16_t> x_out(c.n), h_out(c.n), h_in_place(c.n);
  residual_norm_reference(residual_norm_args(c, d, x_out.data(), h_out.data()));
  ResidualNormArgs a = residual_norm_args(c, d, d.x_storage.data() + d.x_offset, h_in_place.data());
  residual_norm_reference(a);
  EXPECT_EQ(std::vector<uint16_t>(d.x(), d.x() + c.n), x_out);
  EXPECT_EQ(h_in_place, h_out);
}

TEST(ResidualNormReference, RejectsBadArguments) {
  uint16_t buf[64] = {};
  int32_t ids[4] = {};
  ResidualNormArgs a;
  a.x = a.y = a.norm_w = buf, a.x_out = a.h_out = buf, a.rows = 1, a.terms = 1, a.n = 8;
  EXPECT_TRUE(check_residual_norm(a).is_ok());
  auto bad = [&](auto change) {
    ResidualNormArgs b = a;
    change(b);
    return !check_residual_norm(b).is_ok();
  };
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.norm_w = nullptr; }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.h_out = nullptr; }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.n = 0; }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.n = kResidualNormMaxN + 1; }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.terms = 0; }));
  EXPECT_TRUE(bad([&](ResidualNormArgs& b) { b.bias = buf, b.bias_rows = 1; }));             // no ids
  EXPECT_TRUE(bad([&](ResidualNormArgs& b) { b.bias = buf, b.ids = ids, b.bias_rows = 0; }));  // no bias rows
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.eps = -1e-6f; }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.eps = std::numeric_limits<float>::quiet_NaN(); }));
  EXPECT_TRUE(bad([](ResidualNormArgs& b) { b.eps = std::numeric_limits<float>::infinity(); }));
  EXPECT_FALSE(bad([&](ResidualNormArgs& b) { b.bias = buf, b.ids = ids, b.bias_rows = 1; }));
}

// ---- gpt-oss's expert activation (clamped SwiGLU on interleaved gate/up rows)

// BF16 of a double, rounded to nearest even in one step (the oracle's rounding); the values here
// are normal BF16 numbers, zeros, infinities or NaN.
float bf16_of(double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0.0) return float(v);
  int e = 0;
  const double m = std::frexp(v, &e);                 // v = m * 2^e, 0.5 <= |m| < 1
  const double q = std::nearbyint(std::ldexp(m, 8));  // 8 significant bits, ties to even
  return float(std::ldexp(q, e - 8));
}

// transformers' GptOssExperts step on one (gate, up) pair with torch's BF16 rounding after each
// op, the exponential in double: the oracle the reference is held to.
float swiglu_oracle(float G, float U, bool has_bias, float bg, float bu, double alpha, double limit) {
  double g = G, u = U;
  if (has_bias) g = bf16_of(g + bg), u = bf16_of(u + bu);
  const double L = bf16_of(limit);
  if (g > L) g = L;
  if (u > L) u = L;
  if (u < -L) u = -L;
  const double t = bf16_of(g * double(float(alpha)));
  const double sig = bf16_of(1.0 / (1.0 + std::exp(-t)));
  return bf16_of(double(bf16_of(u + 1.0)) * double(bf16_of(g * sig)));
}

TEST(ExpertSwigluReference, MatchesTheOracleWithinOneBf16UlpAndMostlyExactly) {
  std::mt19937 rng(2026);
  const uint64_t pairs = 64, n = 512;
  const uint32_t experts = 5;
  std::uniform_real_distribution<float> dist(-12.f, 12.f);
  std::vector<uint16_t> gate_up(pairs * n), bias(experts * n), out(pairs * n / 2);
  std::vector<int32_t> ids(pairs);
  for (auto& v : gate_up) v = f32_to_bf16(dist(rng));
  for (auto& v : bias) v = f32_to_bf16(dist(rng) / 4);
  for (auto& v : ids) v = int32_t(rng() % experts);
  for (const float limit : {7.0f, 0.3f, INFINITY})
    for (const float alpha : {1.702f, -0.75f})
      for (const bool with_bias : {true, false}) {
        ExpertSwigluArgs a;
        a.gate_up = gate_up.data(), a.bias = with_bias ? bias.data() : nullptr, a.ids = ids.data();
        a.pairs = pairs, a.n = n, a.bias_rows = experts, a.alpha = alpha, a.limit = limit, a.out = out.data();
        ASSERT_TRUE(check_expert_swiglu(a).is_ok());
        expert_swiglu_reference(a);
        uint64_t exact = 0;
        for (uint64_t p = 0; p < pairs; ++p)
          for (uint64_t j = 0; j < n / 2; ++j) {
            const uint16_t* gu = &gate_up[p * n + 2 * j];
            const uint16_t* b = &bias[uint64_t(ids[p]) * n + 2 * j];
            const float want = swiglu_oracle(bf16_to_f32(gu[0]), bf16_to_f32(gu[1]), with_bias, bf16_to_f32(b[0]), bf16_to_f32(b[1]), alpha, limit);
            const float got = bf16_to_f32(out[p * n / 2 + j]);
            if (f32_to_bf16(want) == out[p * n / 2 + j]) {
              ++exact;
              continue;
            }
            // a sigmoid at a rounding boundary: one BF16 step of its product at most
            ASSERT_LE(std::fabs(double(got) - want), std::ldexp(std::fabs(double(want)) + 1e-30, -7) * 1.01)
                << "limit " << limit << " alpha " << alpha << " pair " << p << " output " << j << ": got " << got << " want " << want;
          }
        EXPECT_GE(double(exact), 0.99 * double(pairs * n / 2)) << "limit " << limit << " alpha " << alpha;
      }
}

TEST(ExpertSwigluReference, HandWorkedValuesAndHostileInputs) {
  // rows: (gate, up) = (100, 100) clamps both to 7: sigmoid(bf16(11.914)) is 1 - 7e-6, 1.0 in
  // BF16, so 8 * 7 = 56; (0, 0): (0 + 1) * 0 = +0; (-100, 0): g * sigmoid(-170) = -100 * 0 = -0,
  // times 1; (NaN, 1) and (1, NaN): NaN; (100, -100): (-7 + 1) * 7 = -42, and with limit =
  // infinity -99 * 100 = -9900, BF16 -9920 (steps of 64 there).
  const float rows[][2] = {{100, 100}, {0, 0}, {-100, 0}, {NAN, 1}, {1, NAN}, {100, -100}};
  std::vector<uint16_t> gate_up;
  for (auto& r : rows) gate_up.push_back(f32_to_bf16(r[0])), gate_up.push_back(f32_to_bf16(r[1]));
  const uint64_t n = gate_up.size();
  std::vector<uint16_t> out(n / 2);
  ExpertSwigluArgs a;
  a.gate_up = gate_up.data(), a.pairs = 1, a.n = n, a.alpha = 1.702f, a.limit = 7.0f, a.out = out.data();
  expert_swiglu_reference(a);
  EXPECT_EQ(bf16_to_f32(out[0]), 56.0f);
  EXPECT_EQ(out[1], 0x0000);
  EXPECT_EQ(out[2], 0x8000);
  EXPECT_EQ(out[3], 0x7fc0);
  EXPECT_EQ(out[4], 0x7fc0);
  EXPECT_EQ(bf16_to_f32(out[5]), -42.0f);  // both clamped: (-7 + 1) * 7
  a.limit = INFINITY;
  expert_swiglu_reference(a);
  EXPECT_EQ(bf16_to_f32(out[5]), -9920.0f);
  // A bias row the ids name; an id out of range gives the pair NaNs.
  std::vector<uint16_t> bias(2 * n, f32_to_bf16(0.0f));
  bias[n + 2] = f32_to_bf16(1.0f), bias[n + 3] = f32_to_bf16(-2.0f);  // row 1, pair (0, 0) -> (1, -2)
  int32_t id = 1;
  a.bias = bias.data(), a.ids = &id, a.bias_rows = 2, a.limit = 7.0f;
  expert_swiglu_reference(a);
  // g = 1: bf16(1.702) = 1.703125, sigmoid = 0.84597 -> BF16 0.84765625; u + 1 = -1: -0.84765625
  EXPECT_EQ(bf16_to_f32(out[1]), -0.84765625f);
  id = 2;
  expert_swiglu_reference(a);
  for (uint16_t v : out) EXPECT_EQ(v, 0x7fc0);
}

TEST(ExpertSwigluReference, RejectsBadArguments) {
  uint16_t buf[8] = {};
  int32_t ids[1] = {};
  ExpertSwigluArgs a;
  a.gate_up = buf, a.out = buf, a.pairs = 1, a.n = 4;
  EXPECT_TRUE(check_expert_swiglu(a).is_ok());
  auto bad = [&](auto change) {
    ExpertSwigluArgs b = a;
    change(b);
    return !check_expert_swiglu(b).is_ok();
  };
  EXPECT_TRUE(bad([](ExpertSwigluArgs& b) { b.n = 5; }));
  EXPECT_TRUE(bad([&](ExpertSwigluArgs& b) { b.bias = buf, b.bias_rows = 1; }));  // no ids
  EXPECT_TRUE(bad([&](ExpertSwigluArgs& b) { b.bias = buf, b.ids = ids; }));      // no bias rows
  EXPECT_TRUE(bad([](ExpertSwigluArgs& b) { b.alpha = NAN; }));
  EXPECT_TRUE(bad([](ExpertSwigluArgs& b) { b.alpha = INFINITY; }));
  EXPECT_TRUE(bad([](ExpertSwigluArgs& b) { b.limit = -1.0f; }));
  EXPECT_TRUE(bad([](ExpertSwigluArgs& b) { b.limit = NAN; }));
  EXPECT_FALSE(bad([](ExpertSwigluArgs& b) { b.limit = INFINITY; }));
  EXPECT_FALSE(bad([&](ExpertSwigluArgs& b) { b.bias = buf, b.ids = ids, b.bias_rows = 1; }));
}

// ---- a gated MLP's activation (silu(gate) * up)

// x rounded once to BF16, nearest even, from a double: 8 significant bits for normal results,
// the subnormal step 2^-133 below 2^-126, infinity past the largest finite BF16. The oracle's
// own rounding, written apart from the library's.
double bf16_exact(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int q = std::max(e - 8, -133);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  return std::fabs(r) > 3.3895313892515355e38 ? std::copysign(INFINITY, x) : r;
}

// transformers' step: act = silu in FP32 then BF16, times up, then BF16; here in double with
// std::exp. NaN -> the canonical NaN's value (compared as bits below).
uint16_t gated_silu_oracle(uint16_t g_bits, uint16_t u_bits) {
  const double g = bf16_to_f32(g_bits), u = bf16_to_f32(u_bits);
  double e = std::exp(-g);
  if (e > FLT_MAX) e = INFINITY;  // FP32's exponential overflows there (g below -88.72): silu is -0
  const double silu = bf16_exact(g / (1.0 + e));
  const double out = bf16_exact(silu * u);
  return std::isnan(out) ? uint16_t(0x7fc0) : f32_to_bf16(float(out));  // out is a BF16 value: exact
}

TEST(GatedSiluReference, MatchesTheOracleOnEveryCaseMostlyExactlyAndElsewhereWithinOneStep) {
  uint32_t seed = 4100;
  for (const auto& c : test::gated_silu_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_gated_silu_data(c, seed += 10);
    std::vector<uint16_t> out(size_t(c.rows) * c.n, 0x1234);
    GatedSiluArgs a;
    a.gate = d.gate(), a.up = d.up(c.halves), a.rows = c.rows, a.n = c.n, a.gate_stride = a.up_stride = d.stride, a.out = out.data();
    ASSERT_TRUE(check_gated_silu(a).is_ok());
    gated_silu_reference(a);
    uint64_t exact = 0;
    for (uint32_t r = 0; r < c.rows; ++r)
      for (uint32_t i = 0; i < c.n; ++i) {
        const uint16_t g = a.gate[r * d.stride + i], u = a.up[r * d.stride + i], got = out[size_t(r) * c.n + i];
        const uint16_t want = gated_silu_oracle(g, u);
        if (got == want) {
          ++exact;
          continue;
        }
        // Only where SiLU's FP32 value sits at a BF16 rounding boundary (exp_same_bits is within
        // 2 ulp of exp): a step of the SiLU's BF16, so at most a step of the product's.
        const double gw = bf16_to_f32(want), gg = bf16_to_f32(got);
        ASSERT_TRUE(std::isfinite(gw) && std::isfinite(gg)) << "gate " << bf16_to_f32(g) << " up " << bf16_to_f32(u) << ": got "
                                                            << gg << " want " << gw;
        ASSERT_LE(std::fabs(gg - gw), std::ldexp(std::fabs(gw), -7) * 1.01 + 1e-40)
            << "gate " << bf16_to_f32(g) << " up " << bf16_to_f32(u) << ": got " << gg << " want " << gw;
      }
    EXPECT_GE(double(exact), 0.995 * double(out.size()));
  }
}

TEST(GatedSiluReference, HandWorkedValuesAndHostileInputs) {
  // silu(0) = 0 and silu(-0) = -0 (0 / 2), times 5; silu(inf) = inf; silu(-inf) = -inf / inf =
  // NaN; NaN in either input is NaN; silu(-100) = -100 / (1 + e^100 = inf) = -0, and so for
  // -89 (e^89 is past FP32's range, as in torch's FP32 kernel); silu(1) = 0.7310586 -> BF16
  // 0.73046875, times 3 = 2.19140625 -> BF16 2.1875; 3e38 * 2 overflows to inf; silu(2) =
  // 1.7615942 -> BF16 1.7578125, times BF16(1e38) = 1.171875 * 2^126: 2.0599 * 2^126 ->
  // BF16 1.03125 * 2^127 (0x7f04).
  const float gates[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -100.0f, 1.0f, 3e38f, 2.0f, -89.0f};
  const float ups[] = {5.0f, 5.0f, 2.0f, 2.0f, 1.0f, NAN, 3.0f, 3.0f, 2.0f, 1e38f, 1.0f};
  const size_t n = std::size(gates);
  std::vector<uint16_t> g(n), u(n), out(n);
  for (size_t i = 0; i < n; ++i) g[i] = f32_to_bf16(gates[i]), u[i] = f32_to_bf16(ups[i]);
  GatedSiluArgs a;
  a.gate = g.data(), a.up = u.data(), a.rows = 1, a.n = n, a.out = out.data();
  gated_silu_reference(a);
  EXPECT_EQ(out[0], 0x0000);
  EXPECT_EQ(out[1], 0x8000);
  EXPECT_EQ(out[2], 0x7f80);
  EXPECT_EQ(out[3], 0x7fc0);
  EXPECT_EQ(out[4], 0x7fc0);
  EXPECT_EQ(out[5], 0x7fc0);
  EXPECT_EQ(out[6], 0x8000);
  EXPECT_EQ(bf16_to_f32(out[7]), 2.1875f);
  EXPECT_EQ(out[8], 0x7f80);
  EXPECT_EQ(out[9], 0x7f04);
  EXPECT_EQ(out[10], 0x8000);
  // Subnormal gates: silu(g) = g / 2 to FP32's precision, BF16 subnormal steps of 2^-133.
  const uint16_t sub_gates[] = {0x0001, 0x0002, 0x0003, 0x807f, 0x0080};
  for (uint16_t sg : sub_gates) {
    const uint16_t one = f32_to_bf16(1.0f);
    a.gate = &sg, a.up = &one, a.n = 1;
    gated_silu_reference(a);
    EXPECT_EQ(out[0], gated_silu_oracle(sg, one)) << std::hex << sg;
  }
}

TEST(GatedSiluReference, RejectsBadArguments) {
  uint16_t buf[64] = {};
  GatedSiluArgs a;
  a.gate = buf, a.up = buf + 8, a.out = buf + 32, a.rows = 2, a.n = 4, a.gate_stride = 4, a.up_stride = 4;
  EXPECT_TRUE(check_gated_silu(a).is_ok());
  auto bad = [&](auto change) {
    GatedSiluArgs b = a;
    change(b);
    return !check_gated_silu(b).is_ok();
  };
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.gate = nullptr; }));
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.up = nullptr; }));
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.out = nullptr; }));
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.gate_stride = 3; }));            // rows would overlap
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.rows = kGatedSiluMaxRows + 1; }));
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.out = buf + 4; }));              // over gate's second row
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.out = buf + 10; }));             // over up
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.out = buf + 1; }));
  EXPECT_FALSE(bad([&](GatedSiluArgs& b) { b.out = buf + 16; }));            // just past up's last row
  EXPECT_FALSE(bad([](GatedSiluArgs& b) { b.gate = b.up = nullptr, b.rows = 0; }));  // nothing to do
  EXPECT_FALSE(bad([](GatedSiluArgs& b) { b.rows = 1, b.gate_stride = 0; }));         // one row: no stride needed
  // Clearing its inputs (the gated expert launch's exchange): gate and up may share no element.
  EXPECT_FALSE(bad([](GatedSiluArgs& b) { b.clear_inputs = true; }));                 // apart
  EXPECT_TRUE(bad([](GatedSiluArgs& b) { b.clear_inputs = true, b.up = b.gate; }));   // the same elements
  EXPECT_FALSE(bad([](GatedSiluArgs& b) { b.up = b.gate; }));                         // fine when only read
  // rows of 2n: gate then up in each, as the exchange holds them
  EXPECT_FALSE(bad([&](GatedSiluArgs& b) { b.clear_inputs = true, b.up = buf + 4, b.gate_stride = b.up_stride = 8; }));
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.clear_inputs = true, b.up = buf + 3, b.gate_stride = b.up_stride = 8; }));  // 1 shared a row
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.clear_inputs = true, b.up = buf + 5, b.gate_stride = b.up_stride = 8; }));  // up's end over the next gate row
  EXPECT_TRUE(bad([&](GatedSiluArgs& b) { b.clear_inputs = true, b.up = buf + 4, b.gate_stride = 8, b.up_stride = 9; }));
}

}  // namespace
}  // namespace iris
