// The int_group kernels (kernels/int_group.cu): dequantization (bit for bit the CPU
// reference) and a first GEMV, called by cuda_dequantize and cuda_gemv for int_group views.
#pragma once

#include <cuda_runtime.h>

#include "common/status.h"
#include "kernels/quant_view.h"

namespace iris {

Status cuda_int_group_dequantize(const QuantView& v, void* out, DType dt, cudaStream_t stream, int sm_count);
Status cuda_int_group_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t stream);

}  // namespace iris
