// The upload's pass that rearranges MXFP4 code words into the kernels' bit-plane order
// (kernels/mxfp4_planes.h): one read and one write of the codes (its time is part of
// DeviceArchive::upload_seconds; it has not been timed apart).
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4_planes.h"

namespace iris {

namespace {

constexpr int kThreads = 256;

// Four words a thread a step (16-byte accesses: every tiled codes component is a multiple of
// 16 bytes and starts 256-byte aligned).
__global__ void mxfp4_to_planes_kernel(uint4* codes, uint64_t units) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += uint64_t(gridDim.x) * blockDim.x) {
    uint4 w = codes[i];
    w.x = mxfp4_word_to_planes(w.x);
    w.y = mxfp4_word_to_planes(w.y);
    w.z = mxfp4_word_to_planes(w.z);
    w.w = mxfp4_word_to_planes(w.w);
    codes[i] = w;
  }
}

// The bytes of a tiled MXFP4 view's codes: every matrix, padding included, two codes a byte.
uint64_t codes_bytes(const QuantView& v) { return v.n == 0 ? 0 : (v.rows / v.n) * matrix_code_bytes(v); }

}  // namespace

Status cuda_mxfp4_to_planes(QuantView& v, void* stream) {
  if (v.format != ViewFormat::kMxfp4 || !v.tiled) return invalid_argument("mxfp4 planes: not a tiled MXFP4 tensor");
  if (v.codes_planes) return invalid_argument("mxfp4 planes: the codes are in that order already");
  const uint64_t bytes = codes_bytes(v);
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(v.codes) % 16 != 0)
    return invalid_argument("mxfp4 planes: the codes are not whole 16-byte units");
  const uint64_t units = bytes / 16;
  if (units) {
    const unsigned grid = unsigned(std::min<uint64_t>((units + kThreads - 1) / kThreads, 8192));
    // The codes are const to every kernel that reads them; this pass alone writes them, on
    // memory its caller owns (the contract above).
    mxfp4_to_planes_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<uint4*>(const_cast<uint8_t*>(v.codes)), units);
    IRIS_CUDA_TRY(cudaGetLastError());
  }
  v.codes_planes = true;
  return Status::ok();
}

}  // namespace iris
