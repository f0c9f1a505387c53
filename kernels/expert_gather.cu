#include "kernels/expert_gather.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"

namespace iris {

namespace {

constexpr int kThreads = 256;

// Block (x, p) copies a stride of pair p's codes (16 bytes a thread) and of its scales (a byte
// a thread: a matrix's scales need not be a multiple of 16 bytes; gpt-oss's gate_up has 518400
// of them, so one block alone would take thousands of rounds).
__global__ void __launch_bounds__(kThreads) gather_mxfp4(const ExpertMatrix* __restrict__ experts, uint32_t count, const int32_t* ids,
                                                          uint64_t code_bytes, uint64_t scale_bytes, uint64_t pairs, uint8_t* ws) {
  const uint64_t p = blockIdx.y;
  const int32_t id = ids[p];
  const bool ok = id >= 0 && uint32_t(id) < count;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  if (ok) {
    const ExpertMatrix& m = experts[id];
    codes = m.view.codes + m.matrix * code_bytes;
    scales = static_cast<const uint8_t*>(m.view.scales) + m.matrix * scale_bytes;
  }
  uint4* dst = reinterpret_cast<uint4*>(ws + p * code_bytes);
  const uint64_t words = code_bytes / 16;
  for (uint64_t i = uint64_t(blockIdx.x) * kThreads + threadIdx.x; i < words; i += uint64_t(gridDim.x) * kThreads)
    dst[i] = ok ? __ldg(reinterpret_cast<const uint4*>(codes) + i) : make_uint4(0, 0, 0, 0);
  uint8_t* sdst = ws + pairs * code_bytes + p * scale_bytes;
  for (uint64_t i = uint64_t(blockIdx.x) * kThreads + threadIdx.x; i < scale_bytes; i += uint64_t(gridDim.x) * kThreads)
    sdst[i] = ok ? __ldg(scales + i) : uint8_t(0xFF);
}

}  // namespace

Status cuda_gather_mxfp4_experts(const ExpertMatrix* experts, uint32_t count, const QuantView& g, const int32_t* ids, uint64_t pairs,
                                 uint8_t* workspace, void* stream) {
  if (pairs == 0) return Status::ok();
  if (pairs > 65535) return invalid_argument("expert dequantize: " + std::to_string(pairs) + " pairs (at most 65535 a launch)");
  const uint64_t code_bytes = matrix_code_bytes(g);
  if (code_bytes % 16 != 0 || (reinterpret_cast<uintptr_t>(workspace) & 15u) != 0)
    return invalid_argument("expert dequantize: the workspace must be 16-byte aligned and the codes whole 16-byte words");
  const uint64_t words = std::max(code_bytes / 16, mxfp4_matrix_scale_bytes(g));  // the longer of the two loops
  const unsigned blocks = unsigned(std::min<uint64_t>((words + kThreads - 1) / kThreads, 256));
  gather_mxfp4<<<dim3(std::max(blocks, 1u), unsigned(pairs)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      experts, count, ids, code_bytes, mxfp4_matrix_scale_bytes(g), pairs, workspace);
  IRIS_CUDA_LAUNCHED("expert gather");
  return Status::ok();
}

}  // namespace iris
