// Host launcher of the fused dequant-GEMV kernels: y[b, row] = sum_k x[b, k] * W[row, k].
//
// Layouts of 16-row stripes (the default tiles) go to the tensor-core kernel (gemv_mma.cu);
// the CUDA-core kernels (gemv_cuda_cores.cuh, compiled per format and batch in generated files)
// take every other layout and batch.
#include "kernels/arch.cuh"
#include "kernels/cuda_check.h"
#include "kernels/fp8.cuh"
#include "kernels/int_group.h"
#include "kernels/gemv_mma.h"
#include "kernels/gemv_cuda_cores.h"
#include "kernels/tuning.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nvfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

template <typename F>
Status launch(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t s) {
  switch (batch) {
    case 1: return detail::gemv_cuda_cores_launch<F, 1>(v, x, y, f32, s);
    case 2: return detail::gemv_cuda_cores_launch<F, 2>(v, x, y, f32, s);
    case 4: return detail::gemv_cuda_cores_launch<F, 4>(v, x, y, f32, s);
    case 8: return detail::gemv_cuda_cores_launch<F, 8>(v, x, y, f32, s);
    case 16: return detail::gemv_cuda_cores_launch<F, 16>(v, x, y, f32, s);
    default: break;
  }
  // Other batch sizes: the next power of two would read past x; run them one at a time.
  for (int b = 0; b < batch; ++b) {
    void* yb = f32 ? static_cast<void*>(static_cast<float*>(y) + b * v.rows) : static_cast<void*>(static_cast<uint16_t*>(y) + b * v.rows);
    IRIS_TRY((detail::gemv_cuda_cores_launch<F, 1>(v, x + b * v.k, yb, f32, s)));
  }
  return Status::ok();
}

}  // namespace

Status cuda_gemv(const QuantView& v, const uint16_t* x, int batch, void* y, DType y_dtype, void* stream, const LaunchConfig& c) {
  if (c.sm_count <= 0) return invalid_argument("gemv: the launch configuration has no SM count");
  if (batch < 1 || batch > 16) return unsupported("gemv: batch must be 1..16");
  if (y_dtype != DType::kBF16 && y_dtype != DType::kF32) return unsupported("gemv: output must be bf16 or f32");
  if (!v.tiled && v.format == ViewFormat::kNf4) return unsupported("gemv: flat NF4 (K not a multiple of the block) has no rows to multiply");
  auto s = static_cast<cudaStream_t>(stream);
  const bool f32 = y_dtype == DType::kF32;
  // Empty tensors: no rows, nothing to write (and no zero-block launch); K = 0, every output
  // is the empty sum, +0.
  if (v.rows == 0) return Status::ok();
  if (v.k == 0) {
    IRIS_CUDA_TRY(cudaMemsetAsync(y, 0, uint64_t(batch) * v.rows * (f32 ? 4 : 2), s));
    return Status::ok();
  }
  if (v.format == ViewFormat::kIntGroup) return cuda_int_group_gemv(v, x, batch, y, f32, s);  // (no tensor-core path yet)
  if (cuda_gemv_uses_tensor_cores(v, batch, c)) return cuda_gemv_mma(v, x, batch, y, f32, stream, c);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, x, batch, y, f32, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, x, batch, y, f32, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, x, batch, y, f32, s);
    case ViewFormat::kNvfp4: return launch<dev::Nvfp4>(v, x, batch, y, f32, s);
    case ViewFormat::kIntGroup: break;
  }
  return unsupported("gemv: unknown format");
}

bool cuda_gemv_uses_tensor_cores(const QuantView& v, int batch, const LaunchConfig& c) {
  return c.variants.gemv_tensor_cores && c.kernel_arch >= kTensorCoreGemvMinArch && gemv_mma_supports(v, batch);
}

}  // namespace iris
