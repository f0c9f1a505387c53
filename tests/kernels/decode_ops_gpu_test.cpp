// The decode kernels (kernels/decode_ops.cu) against their CPU references, bit for bit, on
// every case of decode_cases.h; the router also replayed from a CUDA graph (its counters must
// be left zero for the next replay). Each also runs after a producer that lets it start at
// once and writes its activations late (LateInput): where the kernels are programmatic
// dependents (sm_90 code), one that read them before waiting would see zeros.
// Skips, saying so, where no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "kernels/decode_ops.h"
#include "kernels/device_info.h"
#include "tests/kernels/decode_cases.h"
#include "tests/kernels/late_writer.h"

namespace iris {
namespace {

// Device copies that free themselves.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes, const void* host = nullptr) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess);
    if (host) EXPECT_EQ(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else EXPECT_EQ(cudaMemset(p, 0, std::max<size_t>(bytes, 16)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p); }
  template <class T> T* as() const { return static_cast<T*>(p); }
  template <class T> std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

// `device` zeroed, then a producer on `stream` that releases its dependents at once and
// copies `host` there 200 us later (late_writer.h); the kernel launched next on `stream`
// must see the copy.
struct LateInput {
  DeviceBuffer staging;
  LateInput(void* device, const void* host, size_t bytes, cudaStream_t stream) : staging(bytes, host) {
    EXPECT_EQ(test::write_late(device, staging.p, bytes, stream), cudaSuccess);
  }
};

// A stream that destroys itself.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

// `dev` (attention, pos in range) on a new stream after a producer that writes the last kv
// head's row at pos of `cache`, the device copy of `rows`, late (LateInput): the kernel reads
// the rows before pos ahead of its wait (run v65), never that one. Returns the output.
std::vector<uint16_t> attention_after_pos_row_written_late(const AttentionDecodeArgs& dev, const DeviceBuffer& cache,
                                                           const std::vector<uint16_t>& rows, const test::AttentionCase& c, int64_t pos,
                                                           const DeviceBuffer& out, size_t n_out) {
  const size_t at = (size_t(c.kv_heads - 1) * c.max_len + size_t(pos)) * c.head_dim;
  EXPECT_EQ(cudaMemset(out.p, 0xff, n_out * 2), cudaSuccess);
  Stream stream;
  {
    LateInput late(cache.as<uint16_t>() + at, rows.data() + at, size_t(c.head_dim) * 2, stream.s);
    EXPECT_TRUE(cuda_attention_decode(dev, stream.s).is_ok());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  return out.read<uint16_t>(n_out);
}

class DecodeOps : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = query_device(0);
    if (!d.is_ok()) GTEST_SKIP() << "no CUDA GPU device here (" << d.status().message() << "); these run on the GPU machine";
  }
};

TEST_F(DecodeOps, MoeRouteEqualsTheReferenceBitForBit) {
  uint32_t seed = 100;
  for (const auto& c : test::route_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_route_data(c, seed += 10);
    const size_t nl = size_t(c.rows) * c.experts, nk = size_t(c.rows) * c.top_k;
    std::vector<uint16_t> logits(nl), weights(nk);
    std::vector<int32_t> ids(nk);
    MoeRouteArgs host;
    host.x = d.x(), host.w = d.w.data(), host.bias = c.bias ? d.bias.data() : nullptr;
    host.rows = c.rows, host.experts = c.experts, host.k = c.k, host.top_k = c.top_k;
    host.logits = logits.data(), host.weights = weights.data(), host.ids = ids.data();
    moe_route_reference(host);

    DeviceBuffer x(d.x_storage.size() * 2, d.x_storage.data()), w(d.w.size() * 2, d.w.data());
    DeviceBuffer b(d.bias.size() * 2, d.bias.data()), gl(nl * 2), gw(nk * 2), gi(nk * 4), ws(c.rows * 4);
    MoeRouteArgs dev = host;
    dev.x = x.as<uint16_t>() + c.x_offset, dev.w = w.as<uint16_t>(), dev.bias = c.bias ? b.as<uint16_t>() : nullptr;
    dev.logits = gl.as<uint16_t>(), dev.weights = gw.as<uint16_t>(), dev.ids = gi.as<int32_t>(), dev.workspace = ws.as<uint32_t>();
    Stream stream;
    for (int run = 0; run < 3; ++run) {  // more than once: the counters must be back at zero
      std::optional<LateInput> late;  // run 2: x written late
      if (run == 2) late.emplace(const_cast<uint16_t*>(dev.x), d.x(), size_t(c.rows) * c.k * 2, stream.s);
      ASSERT_TRUE(cuda_moe_route(dev, run == 2 ? stream.s : nullptr).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(gl.read<uint16_t>(nl), logits) << "run " << run;
      EXPECT_EQ(gw.read<uint16_t>(nk), weights) << "run " << run;
      EXPECT_EQ(gi.read<int32_t>(nk), ids) << "run " << run;
      EXPECT_EQ(ws.read<uint32_t>(c.rows), std::vector<uint32_t>(c.rows, 0u)) << "run " << run;
    }
  }
}

TEST_F(DecodeOps, MoeRouteReplaysFromACudaGraph) {
  const test::RouteCase c{"gpt_oss_120b", 1, 128, 2880, 4, true};
  const auto d = test::make_route_data(c, 7);
  std::vector<uint16_t> logits(128), weights(4);
  std::vector<int32_t> ids(4);
  DeviceBuffer x(d.x_storage.size() * 2, d.x_storage.data()), w(d.w.size() * 2, d.w.data()), b(d.bias.size() * 2, d.bias.data());
  DeviceBuffer gl(256), gw(8), gi(16), ws(4);
  MoeRouteArgs dev;
  dev.x = x.as<uint16_t>(), dev.w = w.as<uint16_t>(), dev.bias = b.as<uint16_t>(), dev.rows = 1, dev.experts = 128, dev.k = 2880;
  dev.top_k = 4, dev.logits = gl.as<uint16_t>(), dev.weights = gw.as<uint16_t>(), dev.ids = gi.as<int32_t>(), dev.workspace = ws.as<uint32_t>();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_TRUE(cuda_moe_route(dev, stream).is_ok());
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    // A new input each replay, written in place: the graph reads it afresh.
    const auto x_new = test::random_bf16(c.k, 20 + replay, 1.0f);
    ASSERT_EQ(cudaMemcpy(x.p, x_new.data(), x_new.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    MoeRouteArgs host = dev;
    host.x = x_new.data(), host.w = d.w.data(), host.bias = d.bias.data(), host.workspace = nullptr;
    host.logits = logits.data(), host.weights = weights.data(), host.ids = ids.data();
    moe_route_reference(host);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(gi.read<int32_t>(4), ids) << "replay " << replay;
    EXPECT_EQ(gw.read<uint16_t>(4), weights) << "replay " << replay;
    EXPECT_EQ(ws.read<uint32_t>(1), std::vector<uint32_t>{0u}) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(DecodeOps, MoeRouteRefusesAMissingWorkspace) {
  uint16_t* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 4096), cudaSuccess);
  MoeRouteArgs a;
  a.x = a.w = p, a.logits = a.weights = p, a.ids = reinterpret_cast<int32_t*>(p), a.rows = 1, a.experts = 8, a.k = 8, a.top_k = 2;
  EXPECT_FALSE(cuda_moe_route(a, nullptr).is_ok());
  cudaFree(p);
}

TEST_F(DecodeOps, DenseGemvEqualsTheReferenceBitForBit) {
  uint32_t seed = 900;
  for (const auto& c : test::dense_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_dense_data(c, seed += 10);
    const auto& xs = d.x_storage;
    const auto& w = d.w;
    const auto& bias = d.bias;
    std::vector<uint16_t> want(size_t(c.batch) * c.n);
    DenseGemvArgs host;
    host.w = w.data(), host.bias = c.bias ? bias.data() : nullptr, host.x = d.x();
    host.n = c.n, host.k = c.k, host.batch = c.batch, host.y = want.data();
    dense_gemv_reference(host);
    DeviceBuffer gx(xs.size() * 2, xs.data()), gw(w.size() * 2, w.data()), gb(bias.size() * 2, bias.data()), gy(want.size() * 2);
    DenseGemvArgs dev = host;
    dev.w = gw.as<uint16_t>(), dev.bias = c.bias ? gb.as<uint16_t>() : nullptr, dev.x = gx.as<uint16_t>() + c.x_offset;
    dev.y = gy.as<uint16_t>();
    ASSERT_TRUE(cuda_dense_gemv(dev, nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(gy.read<uint16_t>(want.size()), want);
    Stream stream;
    {
      LateInput late(const_cast<uint16_t*>(dev.x), d.x(), size_t(c.batch) * c.k * 2, stream.s);
      ASSERT_EQ(cudaMemset(gy.p, 0xff, want.size() * 2), cudaSuccess);
      ASSERT_TRUE(cuda_dense_gemv(dev, stream.s).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    EXPECT_EQ(gy.read<uint16_t>(want.size()), want) << "x written late";
    // The FP32 output: the reference's FP32 sums bit for bit.
    std::vector<float> want32(want.size());
    DenseGemvArgs host32 = host;
    host32.y = nullptr, host32.y_f32 = want32.data();
    dense_gemv_reference(host32);
    DeviceBuffer gy32(want32.size() * 4);
    DenseGemvArgs dev32 = dev;
    dev32.y = nullptr, dev32.y_f32 = gy32.as<float>();
    ASSERT_TRUE(cuda_dense_gemv(dev32, nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got32 = gy32.read<float>(want32.size());
    EXPECT_EQ(0, std::memcmp(got32.data(), want32.data(), want32.size() * 4)) << "FP32 output";
  }
}

TEST_F(DecodeOps, AttentionEqualsTheReferenceBitForBit) {
  uint32_t seed = 500;
  for (const auto& c : test::attention_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_attention_data(c, seed += 10);
    const size_t n_out = size_t(c.heads) * c.head_dim;
    DeviceBuffer q(d.q.size() * 2, d.q.data()), k(d.k.size() * 2, d.k.data()), v(d.v.size() * 2, d.v.data());
    DeviceBuffer s(d.sinks.size() * 2, d.sinks.data()), out(n_out * 2), pos_dev(8);
    for (int64_t pos : c.positions) {
      std::vector<uint16_t> want(n_out);
      AttentionDecodeArgs host;
      host.q = d.q.data(), host.k_cache = d.k.data(), host.v_cache = d.v.data(), host.pos = &pos;
      host.sinks = c.sinks ? d.sinks.data() : nullptr, host.heads = c.heads, host.kv_heads = c.kv_heads;
      host.head_dim = c.head_dim, host.max_len = c.max_len, host.window = c.window;
      host.scale = 1.0f / std::sqrt(float(c.head_dim)), host.out = want.data();
      attention_decode_reference(host);
      ASSERT_EQ(cudaMemcpy(pos_dev.p, &pos, 8, cudaMemcpyHostToDevice), cudaSuccess);
      AttentionDecodeArgs dev = host;
      dev.q = q.as<uint16_t>(), dev.k_cache = k.as<uint16_t>(), dev.v_cache = v.as<uint16_t>(), dev.pos = pos_dev.as<int64_t>();
      dev.sinks = c.sinks ? s.as<uint16_t>() : nullptr, dev.out = out.as<uint16_t>();
      ASSERT_TRUE(cuda_attention_decode(dev, nullptr).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(out.read<uint16_t>(n_out), want) << "pos " << pos;
      Stream stream;
      {
        LateInput late(q.p, d.q.data(), d.q.size() * 2, stream.s);
        ASSERT_EQ(cudaMemset(out.p, 0xff, n_out * 2), cudaSuccess);
        ASSERT_TRUE(cuda_attention_decode(dev, stream.s).is_ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
      EXPECT_EQ(out.read<uint16_t>(n_out), want) << "pos " << pos << ", q written late";
      if (pos < 0 || pos >= int64_t(c.max_len)) continue;  // no row at pos
      EXPECT_EQ(attention_after_pos_row_written_late(dev, k, d.k, c, pos, out, n_out), want) << "pos " << pos << ", the k row at pos written late";
      EXPECT_EQ(attention_after_pos_row_written_late(dev, v, d.v, c, pos, out, n_out), want) << "pos " << pos << ", the v row at pos written late";
    }
  }
}

// The rotary + cache-write mode: the outputs and both caches (the rows written at pos, and
// every other row untouched) equal the reference's; again with k_new written late.
TEST_F(DecodeOps, AttentionWithRotaryAndCacheWriteEqualsTheReferenceBitForBit) {
  uint32_t seed = 700;
  for (const auto& c : test::attention_cases()) {
    if (c.head_dim % 2) continue;
    SCOPED_TRACE(c.name);
    const auto d = test::make_attention_data(c, seed += 10);
    const auto r = test::make_rope_data(c, seed);
    const size_t n_out = size_t(c.heads) * c.head_dim;
    DeviceBuffer q(d.q.size() * 2, d.q.data()), s(d.sinks.size() * 2, d.sinks.data()), out(n_out * 2), pos_dev(8);
    DeviceBuffer cs(r.cos.size() * 2, r.cos.data()), sn(r.sin.size() * 2, r.sin.data());
    DeviceBuffer kn(r.k_new.size() * 2, r.k_new.data()), vn(r.v_new.size() * 2, r.v_new.data());
    for (int64_t pos : c.positions) {
      std::vector<uint16_t> want(n_out), k_want = d.k, v_want = d.v;
      AttentionDecodeArgs host;
      host.q = d.q.data(), host.k_cache = k_want.data(), host.v_cache = v_want.data(), host.pos = &pos;
      host.sinks = c.sinks ? d.sinks.data() : nullptr, host.heads = c.heads, host.kv_heads = c.kv_heads;
      host.head_dim = c.head_dim, host.max_len = c.max_len, host.window = c.window;
      host.scale = 1.0f / std::sqrt(float(c.head_dim)), host.out = want.data();
      host.cos = r.cos.data(), host.sin = r.sin.data(), host.k_new = r.k_new.data(), host.v_new = r.v_new.data();
      attention_decode_reference(host);
      for (bool late : {false, true}) {
        DeviceBuffer k(d.k.size() * 2, d.k.data()), v(d.v.size() * 2, d.v.data());  // fresh caches
        ASSERT_EQ(cudaMemcpy(pos_dev.p, &pos, 8, cudaMemcpyHostToDevice), cudaSuccess);
        AttentionDecodeArgs dev = host;
        dev.q = q.as<uint16_t>(), dev.k_cache = k.as<uint16_t>(), dev.v_cache = v.as<uint16_t>(), dev.pos = pos_dev.as<int64_t>();
        dev.sinks = c.sinks ? s.as<uint16_t>() : nullptr, dev.out = out.as<uint16_t>();
        dev.cos = cs.as<uint16_t>(), dev.sin = sn.as<uint16_t>(), dev.k_new = kn.as<uint16_t>(), dev.v_new = vn.as<uint16_t>();
        ASSERT_EQ(cudaMemset(out.p, 0xff, n_out * 2), cudaSuccess);
        Stream stream;
        {
          std::optional<LateInput> written_late;
          if (late) written_late.emplace(kn.p, r.k_new.data(), r.k_new.size() * 2, stream.s);
          ASSERT_TRUE(cuda_attention_decode(dev, stream.s).is_ok());
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        }
        EXPECT_EQ(out.read<uint16_t>(n_out), want) << "pos " << pos << (late ? ", k_new written late" : "");
        EXPECT_EQ(k.read<uint16_t>(k_want.size()), k_want) << "pos " << pos << (late ? ", k_new written late" : "");
        EXPECT_EQ(v.read<uint16_t>(v_want.size()), v_want) << "pos " << pos;
      }
      // q rotated, no k_new (the cache row at pos is the attention's, as a rotation kernel
      // before it wrote it): that row written late, the last kv head's k, must be seen.
      if (pos < 0 || pos >= int64_t(c.max_len)) continue;
      std::vector<uint16_t> want_q_only(n_out), k_q_only = d.k, v_q_only = d.v;
      AttentionDecodeArgs q_only = host;
      q_only.k_cache = k_q_only.data(), q_only.v_cache = v_q_only.data(), q_only.out = want_q_only.data();
      q_only.k_new = q_only.v_new = nullptr;
      attention_decode_reference(q_only);
      DeviceBuffer k(d.k.size() * 2, d.k.data()), v(d.v.size() * 2, d.v.data());
      AttentionDecodeArgs dev = q_only;
      dev.q = q.as<uint16_t>(), dev.k_cache = k.as<uint16_t>(), dev.v_cache = v.as<uint16_t>(), dev.pos = pos_dev.as<int64_t>();
      dev.sinks = c.sinks ? s.as<uint16_t>() : nullptr, dev.out = out.as<uint16_t>();
      dev.cos = cs.as<uint16_t>(), dev.sin = sn.as<uint16_t>();
      EXPECT_EQ(attention_after_pos_row_written_late(dev, k, d.k, c, pos, out, n_out), want_q_only)
          << "pos " << pos << ", q rotated, the k row at pos written late";
    }
  }
}

TEST_F(DecodeOps, ResidualNormEqualsTheReferenceBitForBit) {
  uint32_t seed = 1300;
  for (const auto& c : test::residual_norm_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_residual_norm_data(c, seed += 10);
    const size_t xn = size_t(c.rows) * c.n;
    std::vector<uint16_t> want_x(xn), want_h(xn);
    ResidualNormArgs host;
    host.x = d.x(), host.y = d.y.data(), host.norm_w = d.norm_w.data(), host.rows = c.rows, host.terms = c.terms, host.n = c.n;
    host.bias = c.bias_rows ? d.bias.data() : nullptr, host.ids = c.bias_rows ? d.ids.data() : nullptr, host.bias_rows = c.bias_rows;
    host.weights = c.weights ? d.weights.data() : nullptr, host.eps = d.eps, host.weight_in_f32 = c.weight_in_f32;
    host.x_out = want_x.data(), host.h_out = want_h.data();
    residual_norm_reference(host);
    DeviceBuffer gx(d.x_storage.size() * 2, d.x_storage.data()), gy(d.y.size() * 2, d.y.data()), gn(d.norm_w.size() * 2, d.norm_w.data());
    DeviceBuffer gb(d.bias.size() * 2, d.bias.data()), gi(d.ids.size() * 4, d.ids.data()), gw(d.weights.size() * 2, d.weights.data());
    DeviceBuffer gxo(xn * 2), gh(xn * 2);
    ResidualNormArgs dev = host;
    dev.x = gx.as<uint16_t>() + c.x_offset, dev.y = gy.as<uint16_t>(), dev.norm_w = gn.as<uint16_t>();
    dev.bias = c.bias_rows ? gb.as<uint16_t>() : nullptr, dev.ids = c.bias_rows ? gi.as<int32_t>() : nullptr;
    dev.weights = c.weights ? gw.as<uint16_t>() : nullptr;
    dev.x_out = c.in_place ? const_cast<uint16_t*>(dev.x) : gxo.as<uint16_t>(), dev.h_out = gh.as<uint16_t>();
    const auto read_x = [&] {
      std::vector<uint16_t> out(xn);
      EXPECT_EQ(cudaMemcpy(out.data(), dev.x_out, xn * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      return out;
    };
    ASSERT_TRUE(cuda_residual_norm(dev, nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(read_x(), want_x);
    EXPECT_EQ(gh.read<uint16_t>(xn), want_h);
    // Again with the terms written late (and x restored first where the run was in place).
    ASSERT_EQ(cudaMemcpy(const_cast<uint16_t*>(dev.x), d.x(), xn * 2, cudaMemcpyHostToDevice), cudaSuccess);
    Stream stream;
    {
      LateInput late(gy.p, d.y.data(), d.y.size() * 2, stream.s);
      ASSERT_EQ(cudaMemset(gh.p, 0xff, xn * 2), cudaSuccess);
      ASSERT_TRUE(cuda_residual_norm(dev, stream.s).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    EXPECT_EQ(read_x(), want_x) << "terms written late";
    EXPECT_EQ(gh.read<uint16_t>(xn), want_h) << "terms written late";
  }
}

TEST_F(DecodeOps, ResidualNormRejectsBadArgumentsWithoutLaunching) {
  ResidualNormArgs a;  // no pointers
  a.rows = 1, a.terms = 1, a.n = 8;
  EXPECT_FALSE(cuda_residual_norm(a, nullptr).is_ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(DecodeOps, GatedSiluEqualsTheReferenceBitForBit) {
  uint32_t seed = 5100;
  for (const auto& c : test::gated_silu_cases()) {
    SCOPED_TRACE(c.name);
    const auto d = test::make_gated_silu_data(c, seed += 10);
    const size_t on = size_t(c.rows) * c.n;
    std::vector<uint16_t> want(on);
    GatedSiluArgs host;
    host.gate = d.gate(), host.up = d.up(c.halves), host.rows = c.rows, host.n = c.n, host.gate_stride = host.up_stride = d.stride;
    host.out = want.data();
    gated_silu_reference(host);
    DeviceBuffer gg(d.gate_storage.size() * 2, d.gate_storage.data()), gu(d.up_storage.size() * 2, d.up_storage.data());
    DeviceBuffer go(on * 2 + 2 * c.offset);
    GatedSiluArgs dev = host;
    dev.gate = gg.as<uint16_t>() + d.gate_at, dev.up = (c.halves ? gg : gu).as<uint16_t>() + d.up_at;
    uint16_t* out = go.as<uint16_t>() + c.offset;
    dev.out = out;
    const auto read = [&] {
      std::vector<uint16_t> got(on);
      EXPECT_EQ(cudaMemcpy(got.data(), out, on * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      return got;
    };
    ASSERT_EQ(cudaMemset(go.p, 0xff, on * 2 + 2 * c.offset), cudaSuccess);
    ASSERT_TRUE(cuda_gated_silu(dev, nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(read(), want);
    // Again with the inputs written late by a producer that lets this kernel start at once:
    // it must read nothing before its wait. (With separate buffers the second writer's set-up
    // waits for the first, so there up is the one written late.)
    ASSERT_EQ(cudaMemset(go.p, 0xff, on * 2 + 2 * c.offset), cudaSuccess);
    Stream stream;
    {
      std::optional<LateInput> late_gate, late_up;
      if (c.halves) late_gate.emplace(gg.p, d.gate_storage.data(), d.gate_storage.size() * 2, stream.s);
      else late_up.emplace(gu.p, d.up_storage.data(), d.up_storage.size() * 2, stream.s);
      ASSERT_TRUE(cuda_gated_silu(dev, stream.s).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    EXPECT_EQ(read(), want) << "inputs written late";
  }
}

TEST_F(DecodeOps, GatedSiluRejectsBadArgumentsWithoutLaunching) {
  DeviceBuffer buf(256);
  GatedSiluArgs a;
  a.gate = buf.as<uint16_t>(), a.up = buf.as<uint16_t>() + 16, a.out = buf.as<uint16_t>() + 8;  // out over gate's second row
  a.rows = 2, a.n = 8, a.gate_stride = a.up_stride = 16;
  EXPECT_FALSE(cuda_gated_silu(a, nullptr).is_ok());
  a.out = nullptr;
  EXPECT_FALSE(cuda_gated_silu(a, nullptr).is_ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace iris
