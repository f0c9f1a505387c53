// NF4's absmax rounded to BF16, one value a block, for the GEMVs of the declared BF16 table
// (LaunchConfig::nf4_bf16_table): their arithmetic rounds each block's absmax to BF16 anyway
// (bitsandbytes' bf16(bf16(t) * bf16(absmax))), so it is worked out once an upload instead of
// from its double-quantized inputs at every chunk (kernels/NOTES.md, runs v58 and v59).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/kernels.h"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

constexpr int kThreads = 256;

__global__ void nf4_absmax_bf16_kernel(const QuantView v, uint64_t blocks, uint16_t* out) {
  __shared__ float smem[16 + 256];
  dev::Nf4::load_tables(v, smem);
  __syncthreads();
  for (uint64_t b = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += uint64_t(gridDim.x) * blockDim.x)
    out[b] = __bfloat16_as_ushort(__float2bfloat16_rn(dev::Nf4::absmax(v, smem, b)));
}

}  // namespace

uint64_t nf4_absmax_blocks(const QuantView& v) {
  if (v.format != ViewFormat::kNf4 || !v.tiled || v.block_size == 0) return 0;
  return (v.rows * v.k + v.block_size - 1) / v.block_size;
}

Status cuda_nf4_absmax_bf16(const QuantView& v, uint16_t* out, void* stream) {
  if (v.format != ViewFormat::kNf4 || !v.tiled) return invalid_argument("nf4 absmax: not a tiled NF4 tensor");
  const uint64_t blocks = nf4_absmax_blocks(v);
  if (blocks == 0) return Status::ok();
  const unsigned grid = unsigned(std::min<uint64_t>((blocks + kThreads - 1) / kThreads, 4096));
  nf4_absmax_bf16_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(v, blocks, out);
  IRIS_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace iris
