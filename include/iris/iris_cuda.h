/* iris: the CUDA half of the C API (present when iris_has_cuda() returns 1).
 *
 * Upload an archive (or a chosen subset of its tensors) to one GPU in a single pass through
 * pinned staging buffers overlapped with the reads, then run iris's kernels on the device
 * copy: dequantization to F32/F16/BF16 and the fused dequant-GEMV / skinny GEMM for batch
 * 1..16. Results are bit for bit what `iris verify --device cuda` checks: dequantization
 * equals the CPU reference (iris_dequantize_rows), GEMV is within the bound of
 * docs/API.md. Every CUDA error comes back as a status (IRIS_ERR_DEVICE) with the runtime's
 * text, never as an abort.
 *
 * Streams: pass a cudaStream_t (it converts to iris_cuda_stream), or NULL for the legacy
 * default stream. Kernels are enqueued on the stream and the call returns without
 * synchronizing; the caller's buffers must stay valid until the stream reaches them.
 */
#ifndef IRIS_IRIS_CUDA_H_
#define IRIS_IRIS_CUDA_H_

#include "iris/iris.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same type as cudaStream_t, so callers need no cast and this header no CUDA headers. */
typedef struct CUstream_st* iris_cuda_stream;

/* IRIS_OK when `device` (a CUDA ordinal) can run the kernels; IRIS_ERR_NO_DEVICE with the
 * reason otherwise (no driver, no GPU, compute capability below 7.5, a build without code the
 * device can load, CPU-only build). */
IRIS_API iris_status iris_cuda_device_check(int device, char* msg, size_t msg_size);

typedef struct iris_upload_options {
  int device;                /* CUDA ordinal */
  const char* const* names;  /* tensors to upload; NULL = every tensor */
  uint64_t n_names;
  uint64_t staging_bytes;    /* bytes per pinned staging buffer; 0 = 4 MiB */
  uint32_t staging_buffers;  /* 0 = 8 */
  int threads;               /* host threads reading into staging; <= 0 = one per core, up to 16 */
  uint32_t verify;           /* 1: hash each component while it is staged (IRIS_ERR_CORRUPT on a mismatch) */
  uint32_t nf4_table;        /* IRIS_NF4_TABLE_EXACT (0) or IRIS_NF4_TABLE_BF16, below */
  uint32_t reserved32;
  uint64_t reserved[3];
} iris_upload_options;

/* iris_upload_options.nf4_table: how the tensor-core GEMVs of the uploaded archive (its tensors'
 * iris_cuda_gemv, _gemv_matrix, and the expert sets made of them) carry NF4's 16 table values.
 *  - IRIS_NF4_TABLE_EXACT (the default): each as two BF16s, within 2^-16 of its FP32 value;
 *  - IRIS_NF4_TABLE_BF16: each weight as bitsandbytes' own GEMV forms it, the table value
 *    and the block's absmax each rounded to one BF16 and their product rounded to BF16 (each
 *    rounding within 2^-8): half the tensor-core work, for a looser bound (docs/API.md,
 *    "GEMV error bound"). The upload then also holds each NF4 block's absmax as one BF16
 *    (2 bytes a block of 64 weights, worked out on the device; counted in device_bytes). Dequantization is exact either way.
 * Other values give IRIS_ERR_INVALID_ARGUMENT. */
#define IRIS_NF4_TABLE_EXACT 0u
#define IRIS_NF4_TABLE_BF16 1u

/* Fills `options` with the defaults (device 0, every tensor, 8 x 4 MiB staging, a reader per core up to 16). */
IRIS_API void iris_upload_options_init(iris_upload_options* options);

typedef struct iris_cuda_archive iris_cuda_archive;
typedef struct iris_cuda_tensor iris_cuda_tensor;

/* Copies the selected tensors' components to one device allocation, each at a 256-byte
 * aligned address, and returns when the copies are complete (an uploader made for this call
 * alone, see iris_cuda_uploader below). The host archive may be
 * closed afterwards: the device archive keeps its own copy of every descriptor. */
IRIS_API iris_status iris_cuda_upload(const iris_archive* archive, const iris_upload_options* options,
                                      iris_cuda_archive** out, char* msg, size_t msg_size);
/* Frees the device memory (synchronizing the device first); NULL is a no-op. */
IRIS_API void iris_cuda_archive_free(iris_cuda_archive* archive);

/* Reusable upload resources (pinned staging buffers, a copy stream, the device's properties).
 * Setting them up took 26-29 ms on an H100 machine (docs/BENCHMARKS.md), the time of copying
 * about 1.3 GB, so an engine that loads several archives or shards creates one uploader and
 * pays it once. The options' device, staging and threads fields are taken at creation; names
 * and verify per upload. One thread at a time may use an uploader. */
typedef struct iris_cuda_uploader iris_cuda_uploader;
IRIS_API iris_status iris_cuda_uploader_create(const iris_upload_options* options, iris_cuda_uploader** out, char* msg,
                                               size_t msg_size);
IRIS_API void iris_cuda_uploader_free(iris_cuda_uploader* uploader);
IRIS_API iris_status iris_cuda_uploader_upload(iris_cuda_uploader* uploader, const iris_archive* archive,
                                               const iris_upload_options* options, iris_cuda_archive** out, char* msg,
                                               size_t msg_size);

/* Device bytes held, and how the upload went: bytes copied and seconds (wall clock). */
IRIS_API uint64_t iris_cuda_archive_device_bytes(const iris_cuda_archive* archive);
IRIS_API double iris_cuda_archive_upload_seconds(const iris_cuda_archive* archive);
IRIS_API uint64_t iris_cuda_archive_tensor_count(const iris_cuda_archive* archive);

/* Tensor views into a device archive, owned by it (valid until iris_cuda_archive_free). */
IRIS_API iris_status iris_cuda_archive_tensor(const iris_cuda_archive* archive, uint64_t index,
                                              const iris_cuda_tensor** tensor, char* msg, size_t msg_size);
IRIS_API iris_status iris_cuda_archive_find_tensor(const iris_cuda_archive* archive, const char* name,
                                                   const iris_cuda_tensor** tensor, char* msg, size_t msg_size);
/* The descriptor (identical to the host archive's iris_tensor_info). */
IRIS_API void iris_cuda_tensor_info(const iris_cuda_tensor* tensor, iris_tensor_info* info);
/* The device address of the tensor's component with role `role`, NULL if it has none. Each
 * holds the archive's bytes, with one exception: the codes of an MXFP4 tensor that the
 * tensor-core GEMV runs (iris_cuda_gemv_uses_tensor_cores(tensor, 1) is 1) are in its order,
 * each aligned 32-bit word's 32 bits rearranged as docs/API.md ("MXFP4 codes on the device")
 * tables them (the same bytes hold the same eight codes; only their bits move), which lets
 * the GEMVs decode a word in 13 instructions instead of 19 (counted in the source). */
IRIS_API const void* iris_cuda_tensor_component(const iris_cuda_tensor* tensor, iris_role role);

/* Dequantizes the whole tensor into device memory `out` ([rows, K] row-major, F32, F16 or
 * BF16; out_size bytes at least rows * K * element size) in one kernel launch. Raw tensors
 * give IRIS_ERR_UNSUPPORTED, as do layouts the kernels were not built for (the message says which). */
IRIS_API iris_status iris_cuda_dequantize(const iris_cuda_tensor* tensor, iris_dtype out_dtype, void* out,
                                          size_t out_size, iris_cuda_stream stream, char* msg, size_t msg_size);

/* y[b, r] = sum_k x[b, k] * W[r, k] for b < batch (1..16), r < rows (all matrices of a stack,
 * batch-major as in iris_tensor_info.rows), x BF16 [batch, K] row-major on the device, y
 * [batch, rows] of y_dtype (F32 or BF16), FP32 accumulation, one launch. Tiled layouts only. */
IRIS_API iris_status iris_cuda_gemv(const iris_cuda_tensor* tensor, const uint16_t* x, int batch, void* y,
                                    iris_dtype y_dtype, iris_cuda_stream stream, char* msg, size_t msg_size);
/* The same for matrix `matrix` of a tiled [E, N, K] stack alone (an MoE expert): reads only
 * that matrix's tiles and scales; y is [batch, N]. IRIS_ERR_UNSUPPORTED for NF4 with double
 * quantization whose matrix starts inside a nested absmax block. */
IRIS_API iris_status iris_cuda_gemv_matrix(const iris_cuda_tensor* tensor, uint64_t matrix, const uint16_t* x, int batch,
                                           void* y, iris_dtype y_dtype, iris_cuda_stream stream, char* msg, size_t msg_size);
/* An expert set: the experts of one MoE projection, for the grouped expert GEMV below. Either
 * the E matrices of one tiled [E, N, K] stack (gpt-oss: pass that one tensor, count = 1), or
 * `count` separate tiled [N, K] tensors of one format and geometry (Mixtral's per-expert w1,
 * w2, w3), expert e being tensors[e]. Creating one copies the experts' views to the device
 * (a synchronous copy, once); the set reads the tensors' device memory, so it must be freed
 * before their archives. Any number of streams may use a set at once. */
typedef struct iris_cuda_experts iris_cuda_experts;
IRIS_API iris_status iris_cuda_experts_create(const iris_cuda_tensor* const* tensors, uint64_t count, iris_cuda_experts** out,
                                              char* msg, size_t msg_size);
/* The same over row blocks: each of the `count` tiled [N_i, K] tensors (one format, K and tiles)
 * is cut into N_i / rows matrices of `rows` rows, in order, and those are the experts. Several
 * projections of one input then run as one launch: q, k and v with rows = k's N give q's
 * blocks, k and v, expert ids 0..n_q/rows + 1 on the same row of x. `rows` must divide every
 * N_i and be whole tile stripes (and whole FP8 scale blocks); IRIS_ERR_INVALID_ARGUMENT
 * otherwise. */
IRIS_API iris_status iris_cuda_experts_create_rows(const iris_cuda_tensor* const* tensors, uint64_t count, uint64_t rows,
                                                   iris_cuda_experts** out, char* msg, size_t msg_size);
IRIS_API void iris_cuda_experts_free(iris_cuda_experts* experts);
/* The number of experts, and N and K of each (0 for NULL). */
IRIS_API uint64_t iris_cuda_experts_count(const iris_cuda_experts* experts);
IRIS_API uint64_t iris_cuda_experts_n(const iris_cuda_experts* experts);
IRIS_API uint64_t iris_cuda_experts_k(const iris_cuda_experts* experts);
/* 1 when iris_cuda_gemv_experts runs this set on the tensor cores, 0 on FP32 CUDA cores (the
 * error bound differs, as for iris_cuda_gemv_uses_tensor_cores). */
IRIS_API int iris_cuda_experts_use_tensor_cores(const iris_cuda_experts* experts);

/* The grouped expert GEMV of an MoE layer, one launch, reading only the selected experts'
 * tiles: for each of `pairs` (token, expert) pairs p,
 *     y[p, :] = W[expert_ids[p]] x[x_rows[p], :]
 * with expert_ids and x_rows int32 arrays of `pairs` entries in device memory (the router's
 * top-k indices flattened, and the token of each; x_rows NULL means row p), x BF16
 * [x_count, K] row-major on the device (16-byte aligned), y [pairs, N] of y_dtype (F32 or
 * BF16). FP32 accumulation in the order of the dense GEMV at batch 1 on that expert alone:
 * each row equals iris_cuda_gemv_matrix (or iris_cuda_gemv of tensors[e]) at batch 1 bit for
 * bit, on the tensor cores where iris_cuda_experts_use_tensor_cores says so, else on the
 * CUDA-core kernel. An expert index outside
 * [0, count) or a row outside [0, x_count) cannot be seen on the host without a sync: that
 * pair's outputs are NaN, and nothing outside the set and x is read. */
IRIS_API iris_status iris_cuda_gemv_experts(const iris_cuda_experts* experts, const int32_t* expert_ids, const int32_t* x_rows,
                                            uint64_t pairs, const uint16_t* x, uint64_t x_count, void* y, iris_dtype y_dtype,
                                            iris_cuda_stream stream, char* msg, size_t msg_size);
/* iris_cuda_gemv_experts with gpt-oss's expert activation in the same launch, in place of a
 * separate kernel after it: y BF16 [pairs, N / 2], y[p, j] = the clamped SwiGLU of outputs 2j
 * (gate) and 2j + 1 (up) of pair p (their BF16 values, each plus bias row expert_ids[p] when
 * bias, BF16 [count, N], is not NULL), as transformers' GptOssExperts computes it on BF16
 * tensors (docs/API.md gives the arithmetic; gpt-oss: alpha 1.702, limit config.swiglu_limit).
 * N even, alpha finite, limit >= 0 (infinity: no clamp); IRIS_ERR_INVALID_ARGUMENT otherwise.
 * A pair with a bad index gets NaN outputs. */
IRIS_API iris_status iris_cuda_gemv_experts_swiglu(const iris_cuda_experts* experts, const int32_t* expert_ids, const int32_t* x_rows,
                                                   uint64_t pairs, const uint16_t* x, uint64_t x_count, const uint16_t* bias,
                                                   float alpha, float limit, uint16_t* y, iris_cuda_stream stream, char* msg,
                                                   size_t msg_size);
/* iris_cuda_gemv_experts with a gated MLP's activation in the same launch, in place of a
 * separate kernel after it (Llama's gate and up projections as pairs 0 and 1 of one set, x
 * row 0 for both): pairs 2j (gate) and 2j + 1 (up) give row j of out, BF16 [pairs / 2, N],
 * out[j, i] = bf16(bf16(silu(g)) * u) of their BF16 outputs g and u (iris_cuda_gated_silu's
 * arithmetic). exchange: iris_cuda_experts_gated_exchange(experts, pairs) uint32 in device
 * memory, zero before the first call (one cudaMemset) and left zero by every call, so a CUDA
 * graph replays it; calls that may run at once need their own. pairs even; out overlaps no
 * other operand. A pair with a bad index makes its row of out NaN. */
IRIS_API iris_status iris_cuda_gemv_experts_gated(const iris_cuda_experts* experts, const int32_t* expert_ids, const int32_t* x_rows,
                                                  uint64_t pairs, const uint16_t* x, uint64_t x_count, uint32_t* exchange, uint16_t* out,
                                                  iris_cuda_stream stream, char* msg, size_t msg_size);
/* The number of uint32 words of exchange iris_cuda_gemv_experts_gated takes for `pairs`
 * pairs: (pairs / 2) * N (0 for NULL experts). */
IRIS_API uint64_t iris_cuda_experts_gated_exchange(const iris_cuda_experts* experts, uint64_t pairs);
/* 1 when iris_cuda_gemv_experts_gated computes the activation inside the GEMV's own launch (one
 * kernel), 0 when it runs the plain launch into the exchange, then iris_cuda_gated_silu's
 * kernel, which also sets the exchange back to zero (the CUDA-core kernels; or where the
 * activation's store would cost the launch blocks a SM: docs/API.md). Both give the same bits;
 * where this says 0, iris_cuda_gemv_experts then iris_cuda_gated_silu is the same two launches
 * without the exchange's traffic. 0 for NULL, in a build without CUDA, and where the device's
 * occupancy cannot be asked (the call itself then reports what is wrong). */
IRIS_API int iris_cuda_experts_gated_in_launch(const iris_cuda_experts* experts);
/* The experts a router picked, dequantized: out [pairs, N, K] of out_dtype (F32, BF16 or F16),
 * row-major, holds expert expert_ids[p] as matrix p, the values iris_cuda_dequantize gives that
 * matrix, bit for bit. expert_ids: int32 [pairs] in device memory (read on the device: nothing
 * synchronizes, so a CUDA graph can hold the call); an id outside [0, count) makes its matrix
 * NaN. workspace: iris_cuda_experts_dequantize_workspace(experts, pairs) bytes of device memory,
 * 16-byte aligned, where the picked matrices are gathered first; calls that may run at once
 * need their own. MXFP4 experts only (gpt-oss's stacks): other formats give
 * IRIS_ERR_UNSUPPORTED. At most 65535 pairs, and pairs * N * K (padded to tiles) below 2^34, a
 * call (IRIS_ERR_INVALID_ARGUMENT beyond). For checking modes that need the picked experts' values without
 * dequantizing a whole stack (iris.models' exact sums). */
IRIS_API iris_status iris_cuda_experts_dequantize(const iris_cuda_experts* experts, const int32_t* expert_ids, uint64_t pairs,
                                                  void* workspace, size_t workspace_size, iris_dtype out_dtype, void* out,
                                                  size_t out_size, iris_cuda_stream stream, char* msg, size_t msg_size);
/* The workspace iris_cuda_experts_dequantize takes for `pairs` pairs, in bytes (0 for NULL, or
 * for experts it does not take). */
IRIS_API uint64_t iris_cuda_experts_dequantize_workspace(const iris_cuda_experts* experts, uint64_t pairs);
/* 1 when iris_cuda_gemv runs this tensor at this batch on the tensor cores (BF16 operands),
 * 0 when on FP32 CUDA cores: the two have different error bounds (docs/API.md). */
IRIS_API int iris_cuda_gemv_uses_tensor_cores(const iris_cuda_tensor* tensor, int batch);

/* The decode step's small kernels beside the GEMVs, on raw device pointers of the current
 * device; each is one launch, never synchronizes, and equals its CPU reference
 * (kernels/decode_reference.cpp) bit for bit. docs/API.md gives their arithmetic. */

/* The MoE router of `rows` tokens: logits[r, e] = x[r, :] . w[e, :] + bias[e] (FP32 sums,
 * rounded to BF16), ids[r, :] the top_k largest logits of row r, largest first (ties to the
 * lower index, NaN above every number, as torch.topk ranks them), weights[r, :] the softmax
 * over those top_k logits (BF16). x BF16 [rows, k], w BF16 [experts, k], bias BF16 [experts]
 * or NULL, logits BF16 [rows, experts], weights BF16 [rows, top_k], ids int32 [rows, top_k];
 * experts <= 1024, top_k <= min(experts, 32). `workspace`: `rows` uint32 counters, zero
 * before the first call (cudaMemset) and left zero by every call; concurrent calls need their
 * own. gpt-oss's router is this; Mixtral's (softmax over all logits, top-k, renormalized) is
 * the same weights up to rounding. */
IRIS_API iris_status iris_cuda_moe_route(const uint16_t* x, uint64_t rows, const uint16_t* w, const uint16_t* bias, uint64_t experts,
                                         uint64_t k, uint64_t top_k, uint16_t* logits, uint16_t* weights, int32_t* ids,
                                         uint32_t* workspace, iris_cuda_stream stream, char* msg, size_t msg_size);

/* A dense BF16 GEMV with its bias in one launch, on raw device pointers: y[b, r] =
 * x[b, :] . w[r, :] + bias[r] (FP32 sums, rounded to BF16) for w BF16 [n, k] row-major, bias
 * BF16 [n] or NULL, x BF16 [batch, k], y BF16 [batch, n], batch 1..16. For the BF16
 * projections a model ships beside its quantized ones (gpt-oss's attention): cuBLAS takes a
 * bias as a split-K GEMV plus a reduction kernel, or a separate add. */
IRIS_API iris_status iris_cuda_gemv_bf16(const uint16_t* w, uint64_t n, uint64_t k, const uint16_t* bias, const uint16_t* x, int batch,
                                         uint16_t* y, iris_cuda_stream stream, char* msg, size_t msg_size);

/* iris_cuda_gemv_bf16 with the FP32 sums (plus the bias) written unrounded to y FP32 [batch,
 * n]: a model's logits from its BF16 lm_head, where rounding to BF16 makes ties among a large
 * vocabulary common. The same sums as iris_cuda_gemv_bf16's before its rounding. */
IRIS_API iris_status iris_cuda_gemv_bf16_f32(const uint16_t* w, uint64_t n, uint64_t k, const uint16_t* bias, const uint16_t* x,
                                             int batch, float* y, iris_cuda_stream stream, char* msg, size_t msg_size);

/* Attention of one query over a static KV cache: for each query head h (kv head
 * h / (heads / kv_heads)), softmax(scale * q[h] . k[p]) over positions p with
 * pos - window < p <= pos (window 0: every p <= pos), joined in its denominator by sinks[h]
 * when sinks is not NULL (gpt-oss), times v[p]; FP32 throughout, the output rounded to BF16.
 * q BF16 [heads, head_dim], k_cache and v_cache BF16 [kv_heads, max_len, head_dim], pos one
 * int64 in device memory (so one CUDA graph serves every position; a position outside
 * [0, max_len) gives NaN outputs), sinks BF16 [heads] or NULL, out BF16 [heads, head_dim];
 * head_dim <= 256.
 * On sm_90 and newer both attention calls are programmatic launches: where the kernel just
 * before them on the stream lets its dependents start early (griddepcontrol.launch_dependents,
 * as iris's own kernels do, each after waiting for the kernel before it), they read pos, the
 * cache rows before pos, cos and sin before that kernel ends, and q, k_new, v_new and the
 * cache row at pos only after. Such a kernel must not write pos, those rows, cos or sin, and
 * must itself have waited for the kernels before it when it lets them start; an ordinary
 * kernel or copy before them may write anything. */
IRIS_API iris_status iris_cuda_attention_decode(const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, const int64_t* pos,
                                                const uint16_t* sinks, uint64_t heads, uint64_t kv_heads, uint64_t head_dim,
                                                uint64_t max_len, uint64_t window, float scale, uint16_t* out,
                                                iris_cuda_stream stream, char* msg, size_t msg_size);

/* iris_cuda_attention_decode with the rotary positions and the KV-cache write of the same step
 * in its launch: q BF16 [heads, head_dim] and k_new, v_new BF16 [kv_heads, head_dim] are the
 * projections' outputs before rotation; with cos and sin (BF16 [max_len, head_dim], the
 * rotate_half form's tables, head_dim even) q and k_new are rotated to pos, and k_new (rotated)
 * and v_new are written into k_cache and v_cache at pos, which the attention then uses. cos and
 * sin may be NULL (no rotation), k_new and v_new too (nothing written). The result equals the
 * rotation and cache write done first and iris_cuda_attention_decode after, bit for bit
 * (kernels/decode_ops.h states the rotation's arithmetic). A position out of range writes
 * nothing and gives NaN outputs. What may write which input just before the launch: as for
 * iris_cuda_attention_decode. */
IRIS_API iris_status iris_cuda_attention_decode_rope(const uint16_t* q, const uint16_t* k_new, const uint16_t* v_new, const uint16_t* cos,
                                                     const uint16_t* sin, uint16_t* k_cache, uint16_t* v_cache, const int64_t* pos,
                                                     const uint16_t* sinks, uint64_t heads, uint64_t kv_heads, uint64_t head_dim,
                                                     uint64_t max_len, uint64_t window, float scale, uint16_t* out,
                                                     iris_cuda_stream stream, char* msg, size_t msg_size);

/* The residual step after a projection or an MoE layer and the next RMSNorm, in one launch,
 * on raw device pointers: for each of `rows` rows, x' = x + sum_t weights[t] * (y[t] +
 * bias[ids[t]]) and h = rms_norm(x', eps) * norm_w, rounded to BF16 where transformers' BF16
 * steps round (kernels/decode_ops.h states the arithmetic). x BF16 [rows, n]; y BF16
 * [rows, terms, n] (a projection's output with terms 1, or the top-k experts' outputs); bias
 * BF16 [bias_rows, n] or NULL, with ids int32 [rows, terms] naming each term's bias row (an id
 * outside [0, bias_rows) makes its row NaN); weights BF16 [rows, terms] or NULL; norm_w BF16
 * [n]; weight_in_f32 nonzero: the norm weight multiplies the FP32 normalized value (gpt-oss),
 * else its BF16 rounding (Llama). Writes x_out (may be x) and h_out, BF16 [rows, n];
 * n <= 32768. */
IRIS_API iris_status iris_cuda_residual_norm(const uint16_t* x, const uint16_t* y, uint64_t rows, uint64_t terms, uint64_t n,
                                             const uint16_t* bias, uint64_t bias_rows, const int32_t* ids, const uint16_t* weights,
                                             const uint16_t* norm_w, float eps, int weight_in_f32, uint16_t* x_out, uint16_t* h_out,
                                             iris_cuda_stream stream, char* msg, size_t msg_size);

/* A gated MLP's activation (Llama, Mistral, Qwen2, Mixtral's experts) on raw device
 * pointers: out[r, i] = bf16(bf16(silu(gate[r, i])) * up[r, i]), transformers' two BF16
 * roundings (kernels/decode_ops.h states the arithmetic). Row r of gate starts at element
 * r * gate_stride and of up at r * up_stride (both BF16), so gate and up may be the two
 * halves of one [rows, 2n] projection output; out BF16 [rows, n], contiguous, overlapping
 * neither input; rows <= 65535. On sm_90 a programmatic launch: it reads its inputs only
 * after the kernel before it has ended, and lets the kernel after it start its own loads once
 * it has read them (docs/API.md, "Programmatic launches"). */
IRIS_API iris_status iris_cuda_gated_silu(const uint16_t* gate, const uint16_t* up, uint64_t rows, uint64_t n, uint64_t gate_stride,
                                          uint64_t up_stride, uint16_t* out, iris_cuda_stream stream, char* msg, size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif /* IRIS_IRIS_CUDA_H_ */
