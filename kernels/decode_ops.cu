// The decode step's small kernels (decode_ops.h): the MoE router, one-query attention, the
// dense BF16 GEMV, the residual step with its RMSNorm, and the gated MLP's activation.
// Each reproduces its CPU reference (decode_reference.cpp) bit for bit: the same operations in
// the same order, fmaf where the reference has it and no contraction elsewhere (--fmad=false).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <initializer_list>

#include "common/float_bits.h"
#include "kernels/cuda_check.h"
#include "kernels/decode_math.h"
#include "kernels/decode_ops.h"
#include "kernels/grid_dependency.cuh"
#include "kernels/launch.h"
#include "kernels/tuning.h"

namespace iris {
namespace {

__device__ __forceinline__ float butterfly32(float s) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) s = s + __shfl_xor_sync(0xffffffffu, s, m);
  return s;
}

__device__ __forceinline__ float bf16_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// ---- the MoE router

// The partial sum of thread t (see decode_ops.h): its chunks' loads issued four at a time
// before their sums, so one memory latency serves the whole row at gpt-oss's k.
__device__ float router_partial(const uint16_t* x, const uint16_t* w, uint32_t k, bool vector, int t) {
  const uint32_t chunks = k / 8;
  float acc = 0.0f;
  constexpr uint32_t kStride = kMoeRouteThreads;
  if (vector) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    const uint4* w8 = reinterpret_cast<const uint4*>(w);
    for (uint32_t c0 = t; c0 < chunks; c0 += 4 * kStride) {
      uint4 xa[4], wa[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (c0 + i * kStride < chunks) xa[i] = __ldg(x8 + c0 + i * kStride), wa[i] = __ldg(w8 + c0 + i * kStride);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (c0 + i * kStride >= chunks) break;
        const uint32_t xs[4] = {xa[i].x, xa[i].y, xa[i].z, xa[i].w};
        const uint32_t ws[4] = {wa[i].x, wa[i].y, wa[i].z, wa[i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc = fmaf(bf16_lo(xs[j]), bf16_lo(ws[j]), acc);
          acc = fmaf(bf16_hi(xs[j]), bf16_hi(ws[j]), acc);
        }
      }
    }
  } else {
    for (uint32_t c = t; c < chunks; c += kStride)
      for (int j = 0; j < 8; ++j) acc = fmaf(bf16_to_f32(x[c * 8 + j]), bf16_to_f32(w[c * 8 + j]), acc);
  }
  if (uint32_t(t) < k % 8) acc = fmaf(bf16_to_f32(x[chunks * 8 + t]), bf16_to_f32(w[chunks * 8 + t]), acc);
  return acc;
}

// grid (experts, rows): a block per logit; the row's last block to finish (a counter in the
// workspace, reset by that block) picks the top-k and their softmax.
__global__ void __launch_bounds__(kMoeRouteThreads) moe_route_kernel(MoeRouteArgs a, bool vector) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t row = blockIdx.y, e = blockIdx.x;
  // The expert's router row is the only memory touched before the producer is done
  // (kernels/grid_dependency.cuh): asked of L2 first.
  if (vector && row == 0 && threadIdx.x == 0) dev::prefetch_l2(a.w + uint64_t(e) * a.k, uint32_t(min(a.k, 1u << 20) * 2));
  dev::wait_for_producer();
  dev::release_dependents();
  uint16_t* logits = a.logits + uint64_t(row) * a.experts;
  __shared__ float warp_sums[kMoeRouteThreads / 32];
  const float part = butterfly32(router_partial(a.x + uint64_t(row) * a.k, a.w + uint64_t(e) * a.k, a.k, vector, threadIdx.x));
  if (lane == 0) warp_sums[warp] = part;
  __syncthreads();
  if (threadIdx.x == 0) {
    float v = warp_sums[0];
#pragma unroll
    for (int i = 1; i < kMoeRouteThreads / 32; ++i) v = v + warp_sums[i];
    if (a.bias) v = v + bf16_to_f32(a.bias[e]);
    logits[e] = bf16_output(v);
  }
  __shared__ bool last;
  __threadfence();  // this block's logits are visible to the device before it counts itself
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(a.workspace + row, 1u) == gridDim.x - 1;
    if (last) a.workspace[row] = 0;  // every block of the row has counted: ready for the next launch
  }
  __syncthreads();
  if (!last || warp != 0) return;
  __threadfence();
  __shared__ int32_t keys[kMoeRouteMaxExperts];
  __shared__ uint16_t values[kMoeRouteMaxExperts];
  __shared__ uint32_t picked[kMoeRouteMaxTopK];
  __shared__ float exps[kMoeRouteMaxTopK];
  __shared__ float sum;
  for (uint32_t i = lane; i < a.experts; i += 32) {
    values[i] = __ldcg(logits + i);  // from L2: other blocks wrote them
    keys[i] = topk_key(values[i]);
  }
  __syncwarp();
  for (uint32_t t = 0; t < a.top_k; ++t) {
    int32_t best_key = INT32_MIN;
    uint32_t best = UINT32_MAX;
    for (uint32_t i = lane; i < a.experts; i += 32)
      if (keys[i] != INT32_MIN && (best == UINT32_MAX || keys[i] > best_key)) best = i, best_key = keys[i];
#pragma unroll
    for (int m = 16; m >= 1; m /= 2) {
      const int32_t other_key = __shfl_xor_sync(0xffffffffu, best_key, m);
      const uint32_t other = __shfl_xor_sync(0xffffffffu, best, m);
      const bool take = other != UINT32_MAX && (best == UINT32_MAX || other_key > best_key || (other_key == best_key && other < best));
      if (take) best = other, best_key = other_key;
    }
    if (lane == 0) picked[t] = best, keys[best] = INT32_MIN;
    __syncwarp();
  }
  // The softmax: each pick's exponential on its own lane, the sum in order on lane 0.
  if (uint32_t(lane) < a.top_k) exps[lane] = exp_same_bits(bf16_to_f32(values[picked[lane]]) - bf16_to_f32(values[picked[0]]));
  __syncwarp();
  if (lane == 0) {
    float total = 0.0f;
    for (uint32_t t = 0; t < a.top_k; ++t) total = total + exps[t];
    sum = total;
  }
  __syncwarp();
  if (uint32_t(lane) < a.top_k) {
    a.weights[uint64_t(row) * a.top_k + lane] = bf16_output(exps[lane] / sum);
    a.ids[uint64_t(row) * a.top_k + lane] = int32_t(picked[lane]);
  }
}

// ---- one-query attention

// T = ceil(head_dim / 32) elements of q, k, v and the output per lane (d = lane + 32 t).
template <int T>
__global__ void __launch_bounds__(kAttentionWarps * 32) attention_decode_kernel(AttentionDecodeArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t h = blockIdx.x, D = a.head_dim;
  // Before the wait (run v65): the position, the cache rows before it and the rotary tables,
  // which the kernel just before this one never writes (decode_ops.h); q, k_new, v_new and the
  // cache row at pos are read after it. Before, every load waited, and the position's load
  // and then the rows' made two memory trips after the producer's end.
  const int64_t pos = *a.pos;
  uint16_t* out = a.out + uint64_t(h) * D;
  if (pos < 0 || pos >= int64_t(a.max_len)) {
    dev::wait_for_producer();
    dev::release_dependents();
    for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) out[d] = 0x7fc0u;  // NaN
    return;
  }
  const int64_t lo = a.window ? max(int64_t(0), pos - int64_t(a.window) + 1) : int64_t(0);
  const uint32_t groups = a.heads / a.kv_heads, kv = h / groups;
  const uint64_t kv_base = uint64_t(kv) * a.max_len * D;
  // Element d of row x, rotated to pos where cos and sin are given (decode_ops.h).
  const uint16_t* cos_row = a.cos ? a.cos + uint64_t(pos) * D : nullptr;
  const uint16_t* sin_row = a.sin ? a.sin + uint64_t(pos) * D : nullptr;
  const uint32_t half = D / 2;
  // This lane's cos and sin (elements d = lane + 32 t), and element d of row x rotated with them.
  float cos_d[T], sin_d[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const uint32_t d = lane + 32 * t;
    cos_d[t] = cos_row && d < D ? bf16_to_f32(cos_row[d]) : 0.0f;
    sin_d[t] = sin_row && d < D ? bf16_to_f32(sin_row[d]) : 0.0f;
  }
  const auto rotated = [&](const uint16_t* x, uint32_t d, int t) {
    if (!cos_row) return bf16_to_f32(x[d]);
    const uint32_t partner = d < half ? d + half : d - half;
    return rope_element(bf16_to_f32(x[d]), bf16_to_f32(x[partner]), d < half, cos_d[t], sin_d[t]);
  };
  const int64_t round = int64_t(kAttentionWarps) * kAttentionUnroll;
  // Rows of the cache in registers as loaded (BF16 bits), a round at a time; round r + 1's
  // loads are issued before round r's sums, and round 0's before the rotation below, so that
  // no round waits for a memory trip behind other work. This position's row, where k_new gives
  // it, is not loaded: the caches' row pos is being written by this launch.
  uint16_t kb[kAttentionUnroll][T], vb[kAttentionUnroll][T];
  // `before_wait`: row pos is left out (zeros) whether or not k_new gives it -- without k_new
  // the kernel just before may have written it -- and loaded after the wait (below).
  const auto load_round = [&](int64_t base, bool before_wait) {
#pragma unroll
    for (int u = 0; u < kAttentionUnroll; ++u) {
      const int64_t j = base + u <= pos ? base + u : pos;
      const bool skip = (a.k_new || before_wait) && j == pos;
      const uint16_t* kr = a.k_cache + kv_base + uint64_t(j) * D;
      const uint16_t* vr = a.v_cache + kv_base + uint64_t(j) * D;
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const uint32_t d = lane + 32 * t;
        kb[u][t] = d < D && !skip ? kr[d] : uint16_t(0);
        vb[u][t] = d < D && !skip ? vr[d] : uint16_t(0);
      }
    }
  };
  int64_t base = lo + int64_t(warp) * kAttentionUnroll;
  if (base <= pos) load_round(base, true);
  dev::wait_for_producer();  // q, k_new, v_new (and the cache row at pos without them) come from the kernel before
  dev::release_dependents();
  // Where this warp's first round holds the cache row at pos and k_new does not give it, the
  // round is loaded again now (its other rows from L1): only a launch without k_new does this.
  if (!a.k_new && base <= pos && pos < base + kAttentionUnroll) load_round(base, false);
  float q[T], acc[T], k_pos[T], v_pos[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const uint32_t d = lane + 32 * t;
    q[t] = d < D ? rotated(a.q + uint64_t(h) * D, d, t) : 0.0f;
    acc[t] = 0.0f;
    // This position's k and v, from k_new / v_new: held here for every block of the kv head,
    // written to the caches at the end by its first block (no block reads them from there).
    k_pos[t] = v_pos[t] = 0.0f;
    if (a.k_new && d < D) {
      k_pos[t] = rotated(a.k_new + uint64_t(kv) * D, d, t);
      v_pos[t] = bf16_to_f32(a.v_new[uint64_t(kv) * D + d]);
    }
  }
  float m = __int_as_float(0xff800000), l = 0.0f;
  for (; base <= pos; base += round) {
    const int n = int(min(int64_t(kAttentionUnroll), pos - base + 1));
    // The round's K and V rows before any of their sums; past pos: a valid row, unused.
    float kf[kAttentionUnroll][T], vf[kAttentionUnroll][T];
#pragma unroll
    for (int u = 0; u < kAttentionUnroll; ++u) {
      const bool from_new = a.k_new && base + u == pos;
#pragma unroll
      for (int t = 0; t < T; ++t) {
        kf[u][t] = from_new ? k_pos[t] : bf16_to_f32(kb[u][t]);
        vf[u][t] = from_new ? v_pos[t] : bf16_to_f32(vb[u][t]);
      }
    }
    if (base + round <= pos) load_round(base + round, false);
    // The round's scores side by side (independent butterflies), then one update.
    float s[kAttentionUnroll];
#pragma unroll
    for (int u = 0; u < kAttentionUnroll; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int t = 0; t < T; ++t) dot = fmaf(q[t], kf[u][t], dot);
      s[u] = butterfly32(dot) * a.scale;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kAttentionUnroll; ++u)
      if (u < n) m_new = s[u] > m_new ? s[u] : m_new;
    const float c = exp_same_bits(m - m_new);
    float p[kAttentionUnroll];
#pragma unroll
    for (int u = 0; u < kAttentionUnroll; ++u) p[u] = u < n ? exp_same_bits(s[u] - m_new) : 0.0f;
    l = fmaf(l, c, p[0]);
#pragma unroll
    for (int u = 1; u < kAttentionUnroll; ++u)
      if (u < n) l = l + p[u];
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float o = acc[t] * c;
#pragma unroll
      for (int u = 0; u < kAttentionUnroll; ++u)
        if (u < n) o = fmaf(p[u], vf[u][t], o);
      acc[t] = o;
    }
    m = m_new;
  }
  __shared__ float part_m[kAttentionWarps], part_l[kAttentionWarps];
  __shared__ float part_acc[kAttentionWarps][T * 32];
  if (lane == 0) part_m[warp] = m, part_l[warp] = l;
#pragma unroll
  for (int t = 0; t < T; ++t) part_acc[warp][lane + 32 * t] = acc[t];
  __syncthreads();
  float M = part_m[0];
  for (int w = 1; w < kAttentionWarps; ++w) M = part_m[w] > M ? part_m[w] : M;
  const float sink = a.sinks ? bf16_to_f32(a.sinks[h]) : __int_as_float(0xff800000);
  if (a.sinks) M = sink > M ? sink : M;
  float c[kAttentionWarps], L = 0.0f;
#pragma unroll
  for (int w = 0; w < kAttentionWarps; ++w) {
    c[w] = exp_same_bits(part_m[w] - M);
    L = fmaf(part_l[w], c[w], L);
  }
  if (a.sinks) L = L + exp_same_bits(sink - M);
  for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttentionWarps; ++w) o = fmaf(part_acc[w][d], c[w], o);
    out[d] = bf16_output(o / L);
  }
  // This position's k and v into the caches, by the first block of the kv head.
  if (a.k_new && h % groups == 0 && warp == 0) {
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const uint32_t d = lane + 32 * t;
      if (d >= D) continue;
      const uint64_t at = kv_base + uint64_t(pos) * D + d;
      const_cast<uint16_t*>(a.k_cache)[at] = cos_row ? bf16_output(k_pos[t]) : a.k_new[uint64_t(kv) * D + d];
      const_cast<uint16_t*>(a.v_cache)[at] = a.v_new[uint64_t(kv) * D + d];
    }
  }
}

// ---- the dense BF16 GEMV

constexpr int kDenseWarps = 8;  // a warp per output row

// B rows of x at once; each lane's chunks loaded four at a time, the next four issued before
// the current four's sums. The first four of the row are loaded before the wait for the
// producer (weights only: kernels/grid_dependency.cuh), so that they arrive while the kernel
// before ends; the rest, and every activation, after it. (A bulk L2 prefetch of the row before the wait lost at the
// quantized GEMVs' shapes in run v46 and was not kept.)
template <int B, bool F32>
__global__ void __launch_bounds__(kDenseWarps * 32) dense_gemv_kernel(DenseGemvArgs a, bool vector) {
  const int lane = threadIdx.x & 31;
  const uint32_t r = blockIdx.x * kDenseWarps + (threadIdx.x >> 5);
  const uint16_t* w = a.w + uint64_t(r < a.n ? r : 0) * a.k;
  const uint32_t chunks = a.k / 8;
  const uint4* w8 = reinterpret_cast<const uint4*>(w);
  uint4 wa[4];
  const auto load_weights = [&](uint4 (&to)[4], uint32_t c0) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (c0 + i * 32 < chunks) to[i] = __ldcs(w8 + c0 + i * 32);  // streamed: read once
  };
  if (vector && r < a.n) load_weights(wa, lane);
  dev::wait_for_producer();
  dev::release_dependents();
  if (r >= a.n) return;
  float acc[B];
#pragma unroll
  for (int b = 0; b < B; ++b) acc[b] = 0.0f;
  if (vector) {
    for (uint32_t c0 = lane; c0 < chunks; c0 += 4 * 32) {
      if (c0 != uint32_t(lane)) load_weights(wa, c0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (c0 + i * 32 >= chunks) break;
        const uint32_t ws[4] = {wa[i].x, wa[i].y, wa[i].z, wa[i].w};
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const uint4 xv = __ldg(reinterpret_cast<const uint4*>(a.x + uint64_t(b) * a.k) + c0 + i * 32);
          const uint32_t xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            acc[b] = fmaf(bf16_lo(xs[j]), bf16_lo(ws[j]), acc[b]);
            acc[b] = fmaf(bf16_hi(xs[j]), bf16_hi(ws[j]), acc[b]);
          }
        }
      }
    }
  } else {
    for (uint32_t c = lane; c < chunks; c += 32)
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int b = 0; b < B; ++b) acc[b] = fmaf(bf16_to_f32(a.x[uint64_t(b) * a.k + c * 8 + j]), bf16_to_f32(w[c * 8 + j]), acc[b]);
  }
  if (uint32_t(lane) < a.k % 8)
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] = fmaf(bf16_to_f32(a.x[uint64_t(b) * a.k + chunks * 8 + lane]), bf16_to_f32(w[chunks * 8 + lane]), acc[b]);
  const float bias = a.bias ? bf16_to_f32(a.bias[r]) : 0.0f;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    float v = butterfly32(acc[b]);
    if (a.bias) v = v + bias;
    if (lane != 0) continue;
    if constexpr (F32) a.y_f32[uint64_t(b) * a.n + r] = v;
    else a.y[uint64_t(b) * a.n + r] = bf16_output(v);
  }
}

template <int B, bool F32>
cudaError_t launch_dense(const DenseGemvArgs& a, bool vector, cudaStream_t stream) {
  return launch_kernel(dense_gemv_kernel<B, F32>, dim3((a.n + kDenseWarps - 1) / kDenseWarps), dim3(kDenseWarps * 32), stream,
                       programmatic_launch({}, loaded_kernel_arch(dense_gemv_kernel<B, F32>)), a, vector);
}

// ---- the residual step and RMSNorm

// Eight BF16 elements [i, i + 8) of p as they are stored: one 16-byte load on the vector path,
// else element by element (zeros past `valid`). Plain loads: x may be this kernel's own output
// (in place).
__device__ __forceinline__ uint4 load8(const uint16_t* p, uint64_t i, uint32_t valid, bool vector) {
  if (vector) return *reinterpret_cast<const uint4*>(p + i);
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t lo = uint32_t(2 * e) < valid ? p[i + 2 * e] : 0u, hi = uint32_t(2 * e + 1) < valid ? p[i + 2 * e + 1] : 0u;
    w[e] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ float element(const uint4& q, int e) {
  const uint32_t w = e < 2 ? q.x : e < 4 ? q.y : e < 6 ? q.z : q.w;
  return e % 2 ? bf16_hi(w) : bf16_lo(w);
}

__device__ __forceinline__ void store8(uint16_t* p, uint64_t i, uint32_t valid, bool vector, const uint16_t (&v)[8]) {
  if (vector) {
    uint4 q;
    q.x = v[0] | (uint32_t(v[1]) << 16), q.y = v[2] | (uint32_t(v[3]) << 16);
    q.z = v[4] | (uint32_t(v[5]) << 16), q.w = v[6] | (uint32_t(v[7]) << 16);
    *reinterpret_cast<uint4*>(p + i) = q;
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (uint32_t(e) < valid) p[i + e] = v[e];
}

// Terms are loaded kTermBatch at a time, all before any is summed: the MoE step's four
// experts' rows (and their bias rows) then cost one memory latency, not four.
constexpr int kTermBatch = 4;

// A block per row; thread j holds chunks j, j + 512, ... (C of them at most) in registers
// between the residual step and the norm.
template <int C>
__global__ void __launch_bounds__(kResidualNormThreads) residual_norm_kernel(ResidualNormArgs a, bool vector) {
  const int j = threadIdx.x, lane = j & 31, warp = j >> 5;
  const uint32_t n = a.n, r = blockIdx.x;
  const uint64_t row = uint64_t(r) * n;
  // The norm weights are the only memory read before the producer is done
  // (kernels/grid_dependency.cuh).
  uint4 wn[C];
#pragma unroll
  for (int cc = 0; cc < C; ++cc) {
    const uint32_t i = 8 * (uint32_t(j) + uint32_t(cc) * kResidualNormThreads);
    if (i < n) wn[cc] = load8(a.norm_w, i, n - i, vector);
  }
  dev::wait_for_producer();
  float xo[C][8];
  float acc = 0.0f;
#pragma unroll
  for (int cc = 0; cc < C; ++cc) {
    const uint32_t i = 8 * (uint32_t(j) + uint32_t(cc) * kResidualNormThreads);
    if (i >= n) break;
    const uint32_t valid = min(8u, n - i);
    const uint4 xq = load8(a.x, row + i, valid, vector);
    float s[8];
    for (uint32_t t0 = 0; t0 < a.terms; t0 += kTermBatch) {
      uint4 yq[kTermBatch], bq[kTermBatch];
      bool id_ok[kTermBatch];
      float w[kTermBatch];
#pragma unroll
      for (int u = 0; u < kTermBatch; ++u) {
        const uint32_t t = t0 + u;
        if (t >= a.terms) break;
        const uint64_t rt = uint64_t(r) * a.terms + t;
        yq[u] = load8(a.y, rt * n + i, valid, vector);
        id_ok[u] = true;
        if (a.bias) {
          const int32_t id = a.ids[rt];
          id_ok[u] = id >= 0 && uint32_t(id) < a.bias_rows;
          if (id_ok[u]) bq[u] = load8(a.bias, uint64_t(id) * n + i, valid, vector);
        }
        w[u] = a.weights ? bf16_to_f32(a.weights[rt]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kTermBatch; ++u) {
        const uint32_t t = t0 + u;
        if (t >= a.terms) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float be = !a.bias ? 0.0f : id_ok[u] ? element(bq[u], e) : __uint_as_float(kCanonicalNanBits);
          const float term = residual_term(element(yq[u], e), a.bias != nullptr, be, a.weights != nullptr, w[u]);
          s[e] = t == 0 ? term : s[e] + term;
        }
      }
    }
    uint16_t out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      xo[cc][e] = bf16_round(element(xq, e) + bf16_round(s[e]));
      out[e] = bf16_output(xo[cc][e]);
      if (uint32_t(e) < valid) acc = fmaf(xo[cc][e], xo[cc][e], acc);
    }
    store8(a.x_out, row + i, valid, vector, out);
  }
  __shared__ float warp_sums[kResidualNormThreads / 32];
  const float part = butterfly32(acc);
  if (lane == 0) warp_sums[warp] = part;
  __syncthreads();
  // The next kernel (a GEMV, whose blocks start with their weight loads) is let in only now,
  // with the row's loads done: released right after the wait it was slower (H200, run v48:
  // Llama-3-8B MXFP4 2.893 against 2.865 ms/token), by inference from its loads competing with
  // this one-block kernel's on the step's critical path.
  dev::release_dependents();
  float total = warp_sums[0];
#pragma unroll
  for (int w = 1; w < kResidualNormThreads / 32; ++w) total = total + warp_sums[w];
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fdiv_rn(total, float(n)) + a.eps));
#pragma unroll
  for (int cc = 0; cc < C; ++cc) {
    const uint32_t i = 8 * (uint32_t(j) + uint32_t(cc) * kResidualNormThreads);
    if (i >= n) break;
    uint16_t out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = rms_norm_output(xo[cc][e] * inv, element(wn[cc], e), a.weight_in_f32);
    store8(a.h_out, row + i, min(8u, n - i), vector, out);
  }
}

// ---- the gated MLP's activation

constexpr int kGatedSiluThreads = 128;

// Thread t of block (bx, r) takes elements [8 (bx * 128 + t), + 8) of row r. Everything it
// reads is the kernel before's output, so it waits first; it lets the next kernel (the down
// projection, whose blocks start with their weight loads) in once its inputs are loaded, as
// residual_norm_kernel does (there, released right after the wait was measured slower).
__global__ void __launch_bounds__(kGatedSiluThreads) gated_silu_kernel(GatedSiluArgs a, bool vector) {
  const uint64_t r = blockIdx.y, i = 8 * (uint64_t(blockIdx.x) * kGatedSiluThreads + threadIdx.x);
  dev::wait_for_producer();
  if (i >= a.n) {
    dev::release_dependents();
    return;
  }
  const uint32_t valid = uint32_t(min(uint64_t(8), a.n - i));
  const uint4 g = load8(a.gate, r * a.gate_stride + i, valid, vector), u = load8(a.up, r * a.up_stride + i, valid, vector);
  if (a.clear_inputs) {  // this thread alone reads these elements
    const uint16_t zero[8] = {};
    store8(const_cast<uint16_t*>(a.gate), r * a.gate_stride + i, valid, vector, zero);
    store8(const_cast<uint16_t*>(a.up), r * a.up_stride + i, valid, vector, zero);
  }
  dev::release_dependents();
  uint16_t out[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = silu_mul(element(g, e), element(u, e));
  store8(a.out, r * a.n + i, valid, vector, out);
}

// Whether the kernels' 16-byte loads of 8 BF16 elements serve: rows of a multiple of 8
// elements and every given pointer 16-byte aligned (a null one, an input left out, counts as
// aligned). Otherwise each kernel takes its element-by-element path, with the same arithmetic.
bool vector_loads(uint32_t row_elements, std::initializer_list<const void*> pointers) {
  if (row_elements % 8 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace

Status cuda_residual_norm(const ResidualNormArgs& a, void* stream) {
  if (Status s = check_residual_norm(a); !s.is_ok()) return s;
  if (a.rows == 0) return Status::ok();
  if (a.rows > uint32_t(INT32_MAX)) return invalid_argument("residual norm: " + std::to_string(a.rows) + " rows (at most 2^31 - 1 a launch)");
  const bool vector = vector_loads(a.n, {a.x, a.y, a.bias, a.norm_w, a.x_out, a.h_out});
  auto* st = static_cast<cudaStream_t>(stream);
  const auto launch = [&](auto kernel) {
    return launch_kernel(kernel, dim3(a.rows), dim3(kResidualNormThreads), st, programmatic_launch({}, loaded_kernel_arch(kernel)), a,
                         vector);
  };
  const uint32_t chunks_per_thread = (a.n + 8 * kResidualNormThreads - 1) / (8 * kResidualNormThreads);
  if (chunks_per_thread <= 1) IRIS_CUDA_TRY(launch(residual_norm_kernel<1>));
  else if (chunks_per_thread <= 2) IRIS_CUDA_TRY(launch(residual_norm_kernel<2>));
  else if (chunks_per_thread <= 4) IRIS_CUDA_TRY(launch(residual_norm_kernel<4>));
  else IRIS_CUDA_TRY(launch(residual_norm_kernel<8>));
  return Status::ok();
}

Status cuda_gated_silu(const GatedSiluArgs& a, void* stream) {
  if (Status s = check_gated_silu(a); !s.is_ok()) return s;
  if (a.rows == 0 || a.n == 0) return Status::ok();
  // 16-byte loads where every row starts 16-byte aligned: strides of a multiple of 8 elements.
  const bool vector = a.n % 8 == 0 && a.gate_stride % 8 == 0 && a.up_stride % 8 == 0 && vector_loads(8, {a.gate, a.up, a.out});
  const uint64_t blocks = (a.n + 8 * kGatedSiluThreads - 1) / (8 * kGatedSiluThreads);
  if (blocks > uint64_t(INT32_MAX)) return invalid_argument("gated silu: n " + std::to_string(a.n) + " is too large for one launch");
  IRIS_CUDA_TRY(launch_kernel(gated_silu_kernel, dim3(uint32_t(blocks), uint32_t(a.rows)), dim3(kGatedSiluThreads),
                              static_cast<cudaStream_t>(stream), programmatic_launch({}, loaded_kernel_arch(gated_silu_kernel)), a,
                              vector));
  return Status::ok();
}

Status cuda_dense_gemv(const DenseGemvArgs& a, void* stream) {
  if (Status s = check_dense_gemv(a); !s.is_ok()) return s;
  if (a.n == 0) return Status::ok();
  const bool vector = vector_loads(a.k, {a.x, a.w});
  auto* st = static_cast<cudaStream_t>(stream);
  // Every batch 1..16 its own instance: the sums stay in registers.
  switch (a.batch) {
#define IRIS_DENSE_CASE(B) \
  case B: IRIS_CUDA_TRY((a.y_f32 ? launch_dense<B, true>(a, vector, st) : launch_dense<B, false>(a, vector, st))); break;
    IRIS_DENSE_CASE(1) IRIS_DENSE_CASE(2) IRIS_DENSE_CASE(3) IRIS_DENSE_CASE(4) IRIS_DENSE_CASE(5) IRIS_DENSE_CASE(6)
    IRIS_DENSE_CASE(7) IRIS_DENSE_CASE(8) IRIS_DENSE_CASE(9) IRIS_DENSE_CASE(10) IRIS_DENSE_CASE(11) IRIS_DENSE_CASE(12)
    IRIS_DENSE_CASE(13) IRIS_DENSE_CASE(14) IRIS_DENSE_CASE(15) IRIS_DENSE_CASE(16)
#undef IRIS_DENSE_CASE
    default: return invalid_argument("dense gemv: batch out of range");
  }
  IRIS_CUDA_LAUNCHED("dense_gemv_kernel");
  return Status::ok();
}

Status cuda_moe_route(const MoeRouteArgs& a, void* stream) {
  if (Status s = check_moe_route(a); !s.is_ok()) return s;
  if (!a.workspace) return invalid_argument("moe route: the workspace must not be NULL");
  if (a.rows == 0) return Status::ok();
  if (a.rows > 65535) return invalid_argument("moe route: " + std::to_string(a.rows) + " rows (at most 65535 a launch)");
  const bool vector = vector_loads(a.k, {a.x, a.w});
  const dim3 grid(a.experts, a.rows);
  IRIS_CUDA_TRY(launch_kernel(moe_route_kernel, grid, dim3(kMoeRouteThreads), static_cast<cudaStream_t>(stream),
                              programmatic_launch({}, loaded_kernel_arch(moe_route_kernel)), a, vector));
  return Status::ok();
}

Status cuda_attention_decode(const AttentionDecodeArgs& a, void* stream) {
  if (Status s = check_attention_decode(a); !s.is_ok()) return s;
  auto* st = static_cast<cudaStream_t>(stream);
  const auto launch = [&](auto kernel) {
    return launch_kernel(kernel, dim3(unsigned(a.heads)), dim3(kAttentionWarps * 32), st, programmatic_launch({}, loaded_kernel_arch(kernel)), a);
  };
  switch ((a.head_dim + 31) / 32) {
    case 1: IRIS_CUDA_TRY(launch(attention_decode_kernel<1>)); break;
    case 2: IRIS_CUDA_TRY(launch(attention_decode_kernel<2>)); break;
    case 3: IRIS_CUDA_TRY(launch(attention_decode_kernel<3>)); break;
    case 4: IRIS_CUDA_TRY(launch(attention_decode_kernel<4>)); break;
    case 5: IRIS_CUDA_TRY(launch(attention_decode_kernel<5>)); break;
    case 6: IRIS_CUDA_TRY(launch(attention_decode_kernel<6>)); break;
    case 7: IRIS_CUDA_TRY(launch(attention_decode_kernel<7>)); break;
    default: IRIS_CUDA_TRY(launch(attention_decode_kernel<8>)); break;
  }
  return Status::ok();
}

}  // namespace iris
