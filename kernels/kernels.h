// Host entry points of the CUDA kernels. Plain C++: callers need no CUDA headers. Streams
// are passed as void* (cudaStream_t underneath; nullptr = the default stream).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "formats/dtype.h"
#include "kernels/launch_config.h"
#include "kernels/quant_view.h"

namespace iris {

// Dequantizes the whole tensor into row-major `out` ([rows, k] of out_dtype: bf16, f16, f32)
// in ONE kernel launch (NF4 double quant included). Bit-exact with the quant/ reference.
Status cuda_dequantize(const QuantView& v, void* out, DType out_dtype, void* stream, const LaunchConfig& config);

// y[b, row] = sum_k x[b, k] * W[row, k] for b < batch (1..16); x bf16 [batch, k] row-major,
// y [batch, rows] of y_dtype (bf16 or f32); FP32 accumulation.
Status cuda_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, DType y_dtype, void* stream,
                 const LaunchConfig& config);

// Whether cuda_gemv runs this tensor and batch on the tensor cores (BF16 operands, FP32
// accumulation) rather than the FP32 CUDA-core kernels: the two have different error bounds
// (verify/gemv_bound.h), so checks ask which one ran. Never on code built for an architecture
// without BF16 mma (config.kernel_arch < 80: Turing, or a compute_75-only build).
bool cuda_gemv_uses_tensor_cores(const QuantView& v, int batch, const LaunchConfig& config);

// Tiled NF4 (the views the tensor-core GEMVs take): the number of absmax blocks of v (0 for
// any other view), and bf16(absmax) of each of them into out (device memory, that many
// uint16) -- QuantView::absmax_bf16, which the GEMVs of the declared BF16 table then read
// instead of the double-quantized absmax.
uint64_t nf4_absmax_blocks(const QuantView& v);
Status cuda_nf4_absmax_bf16(const QuantView& v, uint16_t* out, void* stream);

// Tiled MXFP4: rewrites each 32-bit word of v's codes, in place on the device, from the
// archive's nibble order to the kernels' bit-plane order (kernels/mxfp4_planes.h) and sets
// v.codes_planes. The codes must be device memory the caller owns and may write, and no other
// view of them may be used afterwards unless it is marked too. kInvalidArgument for any other
// view, or one already in that order.
Status cuda_mxfp4_to_planes(QuantView& v, void* stream);

// One matrix of an expert set: matrix `matrix` of the (stack) tensor `view` describes.
struct ExpertMatrix {
  QuantView view;
  uint64_t matrix;
};

// Bit 16 of a gated exchange word: a BF16 output is there (ExpertGemvArgs::gated).
constexpr uint32_t kGatedPresent = 0x10000u;

// The operands of cuda_gemv_experts; every pointer is device memory.
struct ExpertGemvArgs {
  const ExpertMatrix* experts;  // n_experts entries; all have the same format, N, K and tiles
  uint32_t n_experts;
  uint64_t n, k, tile_n;        // of every expert
  const int32_t* expert_ids;    // pairs entries: the expert of pair p
  const int32_t* x_rows;        // pairs entries: the row of x pair p multiplies; nullptr = row p
  uint64_t x_count;             // rows of x
  uint64_t pairs;
  const uint16_t* x;            // bf16 [x_count, k], 16-byte aligned
  void* y;                      // [pairs, n] of the output dtype; with swiglu, bf16 [pairs, n / 2]
  // gpt-oss's expert activation in the same launch (expert_swiglu_reference, decode_ops.h):
  // y[p, j] = clamped_swiglu of outputs 2j and 2j + 1 of pair p plus bias rows expert_ids[p]
  // (bf16 [n_experts, n], or nullptr). BF16 output, n even.
  bool swiglu = false;
  const uint16_t* swiglu_bias = nullptr;
  float swiglu_alpha = 0.0f, swiglu_limit = 0.0f;
  // A gated MLP's activation in the same launch (gated_silu_reference, decode_ops.h): pairs 2j
  // (gate) and 2j + 1 (up) give row j of gated_out (bf16 [pairs / 2, n]) = silu_mul of their
  // BF16 outputs; y is not written. gated_exchange: (pairs / 2) * n uint32 zeros on the device,
  // where the two blocks of an element meet, left zero by every launch (one launch at a time
  // per exchange). pairs even; BF16 output.
  bool gated = false;
  uint16_t* gated_out = nullptr;
  uint32_t* gated_exchange = nullptr;
};

// y[p, :] = experts[expert_ids[p]] x[x_rows[p], :] for p < pairs, one launch, FP32
// accumulation. With `tensor_cores` (every expert gemv_mma_supports at batch 1 and
// config.kernel_arch >= 80) each output equals cuda_gemv on that expert's matrix alone at
// batch 1 on the tensor cores, bit for bit; otherwise cuda_gemv's CUDA-core kernel, bit for
// bit. A pair whose expert or row index is out of range gets NaN outputs. `geometry` is the
// view of any one expert (host copy): it picks the kernel.
Status cuda_gemv_experts(const QuantView& geometry, const ExpertGemvArgs& args, DType y_dtype, bool tensor_cores, void* stream,
                         const LaunchConfig& config);

// The second half of a gated launch made as two (ExpertGemvArgs::gated), after a plain launch
// whose BF16 outputs [pairs, n] went to args.gated_exchange: the activation's own launch
// (cuda_gated_silu) into gated_out, which zeroes each exchange word as it reads it. The same bits as the
// activation in the launch's store.
Status cuda_gated_from_exchange(const ExpertGemvArgs& args, void* stream);


}  // namespace iris
