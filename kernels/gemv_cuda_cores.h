// The CUDA-core GEMV for one format F and batch B (1, 2, 4, 8, 16), declared for gemv.cu and
// defined, once per pair, by the generated instance files (gemv_cuda_cores.cuh says why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/quant_view.h"

namespace iris::detail {

template <typename F, int B>
Status gemv_cuda_cores_launch(const QuantView& v, const uint16_t* x, void* y, bool f32, cudaStream_t s);

}  // namespace iris::detail
