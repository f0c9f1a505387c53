// The decode step's small kernels beside the GEMVs: the MoE router (logits, top-k and the
// softmax over the picked logits in one launch) and attention for one query over a static KV
// cache, with per-head sinks and a sliding window. Each has a CPU reference here that gives
// the same bits (decode_reference.cpp): the kernels are tested against it, and it against an
// independent double-precision oracle (tests/kernels/decode_ops_test.cpp).
//
// Plain C++: callers need no CUDA headers. Streams are void* (cudaStream_t underneath).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace iris {

// A NaN output of either kernel is the canonical quiet NaN, BF16 0x7fc0.
//
// Limits of what the kernels take (checked by check_*; the references take the same).
constexpr uint32_t kMoeRouteMaxExperts = 1024;
constexpr uint32_t kMoeRouteMaxTopK = 32;
constexpr uint32_t kAttentionMaxHeadDim = 256;

struct MoeRouteArgs {
  const uint16_t* x = nullptr;     // bf16 [rows, k]
  const uint16_t* w = nullptr;     // bf16 [experts, k], the router's weight
  const uint16_t* bias = nullptr;  // bf16 [experts], or nullptr
  uint32_t rows = 0, experts = 0, k = 0, top_k = 0;
  uint16_t* logits = nullptr;      // out: bf16 [rows, experts]
  uint16_t* weights = nullptr;     // out: bf16 [rows, top_k], the softmax over the picked logits
  int32_t* ids = nullptr;          // out: [rows, top_k], the picked experts, largest logit first
  uint32_t* workspace = nullptr;   // kernel only: `rows` counters, zero on entry and on return
};

// The arithmetic, which the kernel and the reference share:
//  - logit e of row r: FP32 sums of x[r, i] * w[e, i] in kMoeRouteThreads interleaved partial
//    sums (partial t takes the 8-element chunks t, t + 256, ... in order, fmaf each, then
//    element 8 * (k / 8) + t of a tail), each 32 combined by the butterfly s[l] + s[l ^ m]
//    for m = 16, 8, 4, 2, 1, the eight results added in order; plus the bias; rounded to BF16
//    (round to nearest even).
//  - the top_k largest BF16 logits, largest first; ties to the lower index; NaN above every
//    number; -0 equal to +0 (torch.topk's order, made deterministic).
//  - weights: softmax over the picked BF16 logits in FP32 (exp_same_bits of each minus the
//    first, summed in order, each divided by the sum), rounded to BF16.
constexpr int kMoeRouteThreads = 256;
Status check_moe_route(const MoeRouteArgs& a);
Status cuda_moe_route(const MoeRouteArgs& a, void* stream);
void moe_route_reference(const MoeRouteArgs& a);  // host pointers; workspace unused

struct AttentionDecodeArgs {
  const uint16_t* q = nullptr;        // bf16 [heads, head_dim], one query (rotated)
  const uint16_t* k_cache = nullptr;  // bf16 [kv_heads, max_len, head_dim]
  const uint16_t* v_cache = nullptr;  // bf16 [kv_heads, max_len, head_dim]
  const int64_t* pos = nullptr;       // the query's position, one value (device memory for the kernel)
  const uint16_t* sinks = nullptr;    // bf16 [heads]: a logit per head that joins the softmax's
                                      // denominator only (gpt-oss); nullptr for none
  uint32_t heads = 0, kv_heads = 0, head_dim = 0, max_len = 0;
  uint32_t window = 0;                // attend to positions p with pos - window < p <= pos; 0: all p <= pos
  float scale = 1.0f;                 // the scores' factor (head_dim^-0.5 usually)
  uint16_t* out = nullptr;            // out: bf16 [heads, head_dim]
  // Rotary positions and the cache write in the same launch (both optional):
  const uint16_t* cos = nullptr;      // bf16 [max_len, head_dim], with sin: q (and k_new) are rotated to pos here
  const uint16_t* sin = nullptr;
  const uint16_t* k_new = nullptr;    // bf16 [kv_heads, head_dim], with v_new: this position's k (rotated here
  const uint16_t* v_new = nullptr;    // with cos) and v, written into the caches at pos, which must then be writable
};

// Query head h reads kv head h / (heads / kv_heads). The arithmetic (kernel and reference):
// positions lo..pos in rounds of kAttentionWarps * kAttentionUnroll; in a round, partial w
// takes the positions base + 4 w + u, u = 0..3 (those <= pos): their scores
// s_u = (q . k_u) * scale, each dot product in 32 lane sums (lane l: elements l, l + 32, ...,
// fmaf in order) and the butterfly; then one online-softmax update: m' = max(m, s_0, s_1, ..)
// in order, c = exp(m - m'), p_u = exp(s_u - m'), l = fmaf(l, c, p_0) + p_1 + ..,
// acc = acc * c then fmaf(p_u, v_u, acc) in order of u. The eight partials then merge in
// order with the sink: M = max(m_0..m_7, sink), L = sum l_w exp(m_w - M) + exp(sink - M),
// out = (sum acc_w exp(m_w - M)) / L, rounded to BF16. A position outside [0, max_len)
// gives NaN outputs (the kernel cannot report it without a sync).
// With cos and sin (head_dim even, half = head_dim / 2), q and k_new are first rotated to pos in
// transformers' rotate_half form: x'[d] = bf16(fmaf(r[d], sin[pos, d], x[d] * cos[pos, d])) with
// r[d] = -x[d + half] for d < half, x[d - half] above. With k_new and v_new, the rotated k and v
// are this position's cache rows: the kernel writes them (one block per kv head) and every
// block uses them at pos, so the result equals a rotation and cache write before a plain launch
// bit for bit. A position out of range writes nothing.
// On sm_90 the launch is a programmatic one (kernels/grid_dependency.cuh): where the kernel
// before it in the stream lets its dependents start early, this one reads the position, the
// cache rows before pos and cos / sin before that kernel ends (run v65: a memory trip less
// after the producer's end), and q, k_new, v_new and the cache row at pos after. So such a
// kernel must not write the former, and must have waited for the kernels before it when it
// lets this one start (iris's kernels release after their own wait); in a decode step it is
// the q/k/v projection, or a rotation-and-cache-write kernel, which write only the latter.
constexpr int kAttentionWarps = 8;
constexpr int kAttentionUnroll = 4;
Status check_attention_decode(const AttentionDecodeArgs& a);
Status cuda_attention_decode(const AttentionDecodeArgs& a, void* stream);
void attention_decode_reference(const AttentionDecodeArgs& a);  // host pointers

// A dense BF16 GEMV with its bias in one launch, for the BF16 projections a model ships beside
// its quantized ones (gpt-oss's attention): cuBLAS takes a bias as a split-K GEMV plus a
// reduction kernel, or a separate add.
struct DenseGemvArgs {
  const uint16_t* w = nullptr;     // bf16 [n, k] row-major
  const uint16_t* bias = nullptr;  // bf16 [n], or nullptr
  const uint16_t* x = nullptr;     // bf16 [batch, k]
  uint32_t n = 0, k = 0, batch = 0;  // batch 1..kDenseGemvMaxBatch
  uint16_t* y = nullptr;           // out: bf16 [batch, n]; or
  float* y_f32 = nullptr;          // out: the same sums unrounded, fp32 [batch, n] (a model's logits)
};
constexpr uint32_t kDenseGemvMaxBatch = 16;

// y[b, r] = x[b, :] . w[r, :] + bias[r], rounded to BF16 (y_f32: not rounded): FP32 sums in 32 interleaved partial
// sums (partial l takes the 8-element chunks l, l + 32, ... in order, fmaf each, then element
// 8 * (k / 8) + l of a tail), combined by the butterfly s[l] + s[l ^ m], m = 16..1; plus the bias.
Status check_dense_gemv(const DenseGemvArgs& a);
Status cuda_dense_gemv(const DenseGemvArgs& a, void* stream);
void dense_gemv_reference(const DenseGemvArgs& a);  // host pointers

// The residual step after a projection or an MoE layer and the next RMSNorm, in one launch:
// x' = x + sum_t weights[t] * (y[t] + bias[ids[t]]) and h = rms_norm(x') * norm_w. A decode
// step has two of these a layer, which Inductor compiled into one reduction kernel each; this
// launch in their place gains 0.3-0.5 us a call on an H200 (kernels/NOTES.md run v48).
struct ResidualNormArgs {
  const uint16_t* x = nullptr;        // bf16 [rows, n], the residual stream
  const uint16_t* y = nullptr;        // bf16 [rows, terms, n]: a projection's output (terms 1), or the top-k experts'
  const uint16_t* bias = nullptr;     // bf16 [bias_rows, n] or nullptr: term t of row r adds bias row ids[r, t]
  const int32_t* ids = nullptr;       // [rows, terms]; needed with a bias
  const uint16_t* weights = nullptr;  // bf16 [rows, terms] or nullptr: each term's factor (the routing weights)
  const uint16_t* norm_w = nullptr;   // bf16 [n]
  uint32_t rows = 0, terms = 0, n = 0, bias_rows = 0;
  float eps = 1e-5f;
  bool weight_in_f32 = false;  // the norm weight multiplies the FP32 value (gpt-oss) or its BF16 rounding (Llama)
  uint16_t* x_out = nullptr;   // out: bf16 [rows, n], x'; may be x itself (in place)
  uint16_t* h_out = nullptr;   // out: bf16 [rows, n]; overlaps no input
};
constexpr uint32_t kResidualNormMaxN = 32768;
constexpr int kResidualNormThreads = 512;

// The arithmetic, kernel and reference, element i of row r, with bf16() the rounding to BF16
// (nearest even) where transformers' BF16 tensors round:
//  - term t: v = y[t, i], then v = bf16(v + bias[ids[t], i]) with a bias, then
//    v = bf16(v * weights[t]) with weights; s = v_0 + v_1 + ... in FP32, in order of t;
//  - x'[i] = bf16(x[i] + bf16(s));
//  - the norm: thread j of kResidualNormThreads takes the 8-element chunks j, j + 512, ... (the
//    last one cut at n), fmaf(x', x', acc) over its elements in order; the 32 threads of a warp
//    combined by the butterfly s[l] + s[l ^ m], m = 16..1; the 16 warps' sums added in order;
//    r = 1 / sqrt(sum / n + eps) (IEEE division and square root); t = x'[i] * r;
//  - h[i] = bf16(norm_w[i] * t) with weight_in_f32, else bf16(norm_w[i] * bf16(t)).
// An id outside [0, bias_rows) makes that row's outputs NaN (the kernel cannot report it
// without a sync), as a NaN anywhere in the row does.
Status check_residual_norm(const ResidualNormArgs& a);
Status cuda_residual_norm(const ResidualNormArgs& a, void* stream);
void residual_norm_reference(const ResidualNormArgs& a);  // host pointers

// gpt-oss's expert activation after the gate_up projection, which the grouped expert GEMV can
// apply in its own launch (ExpertGemvArgs::swiglu): out[p, j] = clamped_swiglu (decode_math.h)
// of gate_up[p, 2j] and gate_up[p, 2j + 1] (BF16, interleaved gate and up rows, as gpt-oss
// stores gate_up_proj) plus bias rows ids[p] (bf16 [bias_rows, n] or nullptr). An id outside
// [0, bias_rows) makes the pair's outputs NaN. n even.
struct ExpertSwigluArgs {
  const uint16_t* gate_up = nullptr;  // bf16 [pairs, n]
  const uint16_t* bias = nullptr;     // bf16 [bias_rows, n] or nullptr
  const int32_t* ids = nullptr;       // [pairs]; needed with a bias
  uint64_t pairs = 0, n = 0;
  uint32_t bias_rows = 0;
  float alpha = 1.702f, limit = 7.0f;
  uint16_t* out = nullptr;            // out: bf16 [pairs, n / 2]
};
Status check_expert_swiglu(const ExpertSwigluArgs& a);
void expert_swiglu_reference(const ExpertSwigluArgs& a);  // host pointers

// A gated MLP's activation between its gate/up and down projections (Llama, Mistral, Qwen2;
// Mixtral's experts), as its own launch: out[r, i] = silu_mul(gate[r, i], up[r, i])
// (decode_math.h: transformers' two BF16 roundings). Row r of gate starts at element
// r * gate_stride, of up at r * up_stride, so both may be column ranges of one [rows, 2n]
// output (a grouped gate/up launch's). Inductor's compiled activation is a plain kernel
// between two GEMVs; on sm_90 this one is a programmatic launch (kernels/grid_dependency.cuh):
// it reads nothing before the kernel before it ends, and lets the down projection's blocks in
// (their weight loads) once its own inputs are loaded.
struct GatedSiluArgs {
  const uint16_t* gate = nullptr;  // bf16, row r's n elements at r * gate_stride
  const uint16_t* up = nullptr;    // bf16, row r's n elements at r * up_stride
  uint64_t rows = 0, n = 0, gate_stride = 0, up_stride = 0;
  uint16_t* out = nullptr;         // out: bf16 [rows, n]; overlaps no input
  // Each input element set to +0 once read (the gated expert launch's exchange, which the next
  // launch needs at zero: one kernel fewer than a reset after it); gate and up then share no
  // element (check_gated_silu). Device runs only: the stores go through gate and up, which
  // must then be writable.
  bool clear_inputs = false;
};
constexpr uint32_t kGatedSiluMaxRows = 65535;  // a launch's grid height
Status check_gated_silu(const GatedSiluArgs& a);
Status cuda_gated_silu(const GatedSiluArgs& a, void* stream);
void gated_silu_reference(const GatedSiluArgs& a);  // host pointers

}  // namespace iris
