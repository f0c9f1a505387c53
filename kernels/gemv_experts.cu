// The grouped expert GEMV: y[p, :] = W[expert_ids[p]] x[x_rows[p], :] for every (token,
// expert) pair p of an MoE layer, in one launch that reads only the selected experts' tiles.
// The router's indices stay on the device (no host sync per layer). Where the tensor-core
// GEMV takes the experts, the launch is gemv_mma.cu's (cuda_gemv_experts_mma); otherwise
// each block takes one pair and one stripe (or kRowWarps rows) of its expert and runs the
// same body as cuda_gemv's CUDA-core kernel at batch 1 (gemv_rows.cuh), so every output
// equals that kernel's on the expert's matrix bit for bit.
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/decode_math.h"
#include "kernels/decode_ops.h"
#include "kernels/fp8.cuh"
#include "kernels/gemv_mma.h"
#include "kernels/gemv_rows.cuh"
#include "kernels/int_group.cuh"
#include "kernels/kernels.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nvfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

using dev::kRowWarps;
using dev::kStripeWarps;

// The pair's expert and activation row, or false (the pair's outputs become NaN) when either
// index is out of range: a bad router index must show, never read another tensor's memory.
__device__ __forceinline__ bool pair_operands(const ExpertGemvArgs& a, uint32_t pair, int32_t& e, int64_t& xr) {
  e = a.expert_ids[pair];
  xr = a.x_rows ? a.x_rows[pair] : int64_t(pair);
  return e >= 0 && uint32_t(e) < a.n_experts && xr >= 0 && uint64_t(xr) < a.x_count;
}

template <bool OutF32>
__device__ __forceinline__ void store_nan(const ExpertGemvArgs& a, uint64_t index) {
  dev::store_output<OutF32>(a.y, index, __uint_as_float(0x7fc00000u));  // canonical NaN, 0x7FC0 in BF16
}

// gpt-oss's activation over a block's consecutive output rows (ExpertGemvArgs::swiglu): each
// warp's lane 0 has put row i's sum in sums[i] (i < count, count even, the block's first row
// first_row even); thread j takes rows 2j and 2j + 1. A bad pair (e < 0) gets NaNs.
__device__ __forceinline__ void store_swiglu(const ExpertGemvArgs& a, uint32_t pair, int32_t e, uint64_t first_row, uint32_t count,
                                             const float* sums) {
  const uint32_t j = threadIdx.x;
  if (2 * j >= count) return;
  const uint64_t row = first_row + 2 * j;
  uint16_t* y = static_cast<uint16_t*>(a.y) + uint64_t(pair) * (a.n / 2) + row / 2;
  if (e < 0) {
    *y = 0x7fc0;
    return;
  }
  const uint16_t* b = a.swiglu_bias ? a.swiglu_bias + uint64_t(e) * a.n + row : nullptr;
  *y = clamped_swiglu(sums[2 * j], sums[2 * j + 1], b != nullptr, b ? bf16_to_f32(b[0]) : 0.0f, b ? bf16_to_f32(b[1]) : 0.0f,
                      a.swiglu_alpha, a.swiglu_limit);
}

// The rows of a block that exist: from `first` on, at most `rows`, below n.
__device__ __forceinline__ uint32_t rows_below(uint64_t first, uint32_t rows, uint64_t n) {
  return first >= n ? 0u : (n - first < rows ? uint32_t(n - first) : rows);
}

template <typename F, bool OutF32>
__global__ void __launch_bounds__(kStripeWarps * 32) experts_stripe_kernel(const ExpertGemvArgs a, uint32_t stripes) {
  __shared__ float tables[16 + 256];
  __shared__ float sums[2 * kStripeWarps];
  const uint32_t pair = blockIdx.x / stripes, s = blockIdx.x - pair * stripes;
  const uint32_t warp = threadIdx.x >> 5;
  const uint64_t n0 = uint64_t(s) * a.tile_n + warp, n1 = n0 + kStripeWarps;
  const bool has0 = warp < a.tile_n && n0 < a.n, has1 = warp + kStripeWarps < a.tile_n && n1 < a.n;
  int32_t e;
  int64_t xr;
  if (!pair_operands(a, pair, e, xr)) {  // uniform over the block: every thread returns
    if (a.swiglu) {
      store_swiglu(a, pair, -1, uint64_t(s) * a.tile_n, rows_below(uint64_t(s) * a.tile_n, uint32_t(a.tile_n), a.n), sums);
    } else if ((threadIdx.x & 31) == 0) {
      if (has0) store_nan<OutF32>(a, pair * a.n + n0);
      if (has1) store_nan<OutF32>(a, pair * a.n + n1);
    }
    return;
  }
  const ExpertMatrix& m = a.experts[e];
  const QuantView v = m.view;
  F::load_tables(v, tables);
  __syncthreads();
  float acc0[1], acc1[1];
  dev::stripe_dot<F, 1>(v, tables, m.matrix, s, a.x + uint64_t(xr) * a.k, acc0, acc1);
  if (!OutF32 && a.swiglu) {  // the stripe's rows are warp and warp + kStripeWarps
    if ((threadIdx.x & 31) == 0) sums[warp] = acc0[0], sums[warp + kStripeWarps] = acc1[0];
    __syncthreads();
    store_swiglu(a, pair, e, uint64_t(s) * a.tile_n, rows_below(uint64_t(s) * a.tile_n, uint32_t(a.tile_n), a.n), sums);
    return;
  }
  if ((threadIdx.x & 31) != 0) return;
  if (has0) dev::store_output<OutF32>(a.y, pair * a.n + n0, acc0[0]);
  if (has1) dev::store_output<OutF32>(a.y, pair * a.n + n1, acc1[0]);
}

// int_group experts take the row kernel with the dense int_group GEMV's body (int_group.cuh),
// so each output equals cuda_gemv's on that expert's matrix bit for bit; no tables.
struct IntGroupRows {
  static __device__ __forceinline__ void load_tables(const QuantView&, float*) {}
};

// One output row's sum at batch 1: the row body of the format's dense CUDA-core GEMV.
template <typename F>
__device__ __forceinline__ void expert_row_dot(const QuantView& v, const float* tables, uint64_t row, const uint16_t* __restrict__ x, float (&acc)[1]) {
  if constexpr (std::is_same_v<F, IntGroupRows>) {
    float sums[16];
    dev::int_group_row_dot(v, row, x, 1, sums);
    acc[0] = sums[0];
  } else {
    dev::row_dot<F, 1>(v, tables, row, x, acc);
  }
}

template <typename F, bool OutF32>
__global__ void __launch_bounds__(kRowWarps * 32) experts_row_kernel(const ExpertGemvArgs a, uint32_t blocks_per_pair) {
  __shared__ float tables[16 + 256];
  __shared__ float sums[kRowWarps];
  const uint32_t pair = blockIdx.x / blocks_per_pair;
  const uint64_t first = uint64_t(blockIdx.x - pair * blocks_per_pair) * kRowWarps, r = first + (threadIdx.x >> 5);
  int32_t e;
  int64_t xr;
  if (!pair_operands(a, pair, e, xr)) {
    if (a.swiglu) store_swiglu(a, pair, -1, first, rows_below(first, kRowWarps, a.n), sums);
    else if ((threadIdx.x & 31) == 0 && r < a.n) store_nan<OutF32>(a, pair * a.n + r);
    return;
  }
  const ExpertMatrix& m = a.experts[e];
  const QuantView v = m.view;
  F::load_tables(v, tables);
  __syncthreads();
  if (!OutF32 && a.swiglu) {  // every thread stays for the barrier; the block's rows are first + warp
    float acc[1] = {0.0f};
    if (r < a.n) expert_row_dot<F>(v, tables, m.matrix * v.n + r, a.x + uint64_t(xr) * a.k, acc);
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = acc[0];
    __syncthreads();
    store_swiglu(a, pair, e, first, rows_below(first, kRowWarps, a.n), sums);
    return;
  }
  if (r >= a.n) return;
  float acc[1];
  expert_row_dot<F>(v, tables, m.matrix * v.n + r, a.x + uint64_t(xr) * a.k, acc);
  if ((threadIdx.x & 31) == 0) dev::store_output<OutF32>(a.y, pair * a.n + r, acc[0]);
}

template <typename F>
Status launch(const ExpertGemvArgs& a, bool stripes_path, uint64_t per_pair, bool f32, cudaStream_t s) {
  const unsigned blocks = unsigned(a.pairs * per_pair);
  constexpr bool kStripes = !std::is_same_v<F, IntGroupRows>;  // (int_group: rows only)
  if (kStripes && stripes_path) {
    if constexpr (kStripes) {
      if (f32) experts_stripe_kernel<F, true><<<blocks, kStripeWarps * 32, 0, s>>>(a, uint32_t(per_pair));
      else experts_stripe_kernel<F, false><<<blocks, kStripeWarps * 32, 0, s>>>(a, uint32_t(per_pair));
    }
  } else {
    if (f32) experts_row_kernel<F, true><<<blocks, kRowWarps * 32, 0, s>>>(a, uint32_t(per_pair));
    else experts_row_kernel<F, false><<<blocks, kRowWarps * 32, 0, s>>>(a, uint32_t(per_pair));
  }
  IRIS_CUDA_LAUNCHED("gemv_experts");
  return Status::ok();
}

}  // namespace

Status cuda_gated_from_exchange(const ExpertGemvArgs& args, void* stream) {
  GatedSiluArgs act;
  act.gate = reinterpret_cast<const uint16_t*>(args.gated_exchange), act.up = act.gate + args.n, act.rows = args.pairs / 2;
  act.n = args.n, act.gate_stride = act.up_stride = 2 * args.n, act.out = args.gated_out;
  act.clear_inputs = true;  // the exchange back at zero for the next launch
  return cuda_gated_silu(act, stream);
}

Status cuda_gemv_experts(const QuantView& geometry, const ExpertGemvArgs& args, DType y_dtype, bool tensor_cores, void* stream,
                         const LaunchConfig& config) {
  if (y_dtype != DType::kBF16 && y_dtype != DType::kF32) return unsupported("expert gemv: output must be bf16 or f32");
  if (args.swiglu && y_dtype != DType::kBF16) return invalid_argument("expert gemv: the swiglu activation's output is bf16");
  if (args.swiglu && args.n % 2) return invalid_argument("expert gemv: the swiglu activation needs an even N (gate and up rows in pairs)");
  if (args.gated && (args.swiglu || y_dtype != DType::kBF16 || args.pairs % 2 || !args.gated_out || !args.gated_exchange))
    return invalid_argument("expert gemv: the gated activation needs BF16 outputs, an even number of pairs, gated_out and its exchange");
  if (!geometry.tiled) return unsupported("expert gemv: the experts' codes are not tiled");
  if (args.pairs == 0 || args.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  const bool f32 = y_dtype == DType::kF32;
  if (tensor_cores) return cuda_gemv_experts_mma(geometry, args, f32, stream, config);
  if (args.gated) {
    // The CUDA-core kernels have no such store: the plain launch into the exchange (its
    // (pairs / 2) * n words hold the [pairs, n] BF16 outputs), then the activation's own
    // launch, which sets the exchange back to zero as it reads it.
    ExpertGemvArgs plain = args;
    plain.gated = false, plain.y = args.gated_exchange;
    IRIS_TRY(cuda_gemv_experts(geometry, plain, y_dtype, false, stream, config));
    return cuda_gated_from_exchange(args, stream);
  }
  // K = 0 needs no special case: the bodies sum nothing (+0) and never read x.
  // (int_group: the row kernel always, as its dense GEMV is one warp a row.)
  const bool stripes_path = geometry.format != ViewFormat::kIntGroup && dev::gemv_takes_stripes(geometry, 1);
  // The activation pairs rows 2j and 2j + 1 inside one block: a stripe of an odd tile height
  // would split a pair (the row kernel's blocks are kRowWarps rows, an even number).
  static_assert(kRowWarps % 2 == 0);
  if (args.swiglu && stripes_path && geometry.tile_n % 2)
    return unsupported("expert gemv: the swiglu activation on the CUDA cores needs tiles of an even height");
  const uint64_t per_pair = stripes_path ? geometry.padded_n / geometry.tile_n : (args.n + kRowWarps - 1) / kRowWarps;
  if (args.pairs * per_pair >= (uint64_t(1) << 31)) return invalid_argument("expert gemv: too many pairs for one launch");
  switch (geometry.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(args, stripes_path, per_pair, f32, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(args, stripes_path, per_pair, f32, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(args, stripes_path, per_pair, f32, s);
    case ViewFormat::kIntGroup: return launch<IntGroupRows>(args, false, per_pair, f32, s);
    case ViewFormat::kNvfp4: return launch<dev::Nvfp4>(args, stripes_path, per_pair, f32, s);
  }
  return unsupported("expert gemv: unknown format");
}

}  // namespace iris
