// The experts of one MoE projection on the device, for cuda_gemv_experts: the E matrices of a
// tiled [E, N, K] stack, or E separate tiled [N, K] tensors of one format and geometry. The
// set owns a device array of their views (what the kernel indexes by the router's expert
// ids); the tensors' memory stays with their device archives, which must outlive the set.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/kernels.h"

namespace iris {

class ExpertSet {
 public:
  // `views`: one stack (its matrices are the experts) or several single-matrix tensors.
  // `launch`: the configuration of `device` (DeviceInfo::launch_config), kept for every gemv.
  static Result<ExpertSet> create(const std::vector<QuantView>& views, int device, const LaunchConfig& launch);
  ExpertSet(ExpertSet&&) noexcept;
  ExpertSet& operator=(ExpertSet&&) noexcept;
  ~ExpertSet();

  uint64_t count() const { return count_; }
  const QuantView& geometry() const { return geometry_; }
  // Whether gemv runs on the tensor cores (then each output equals cuda_gemv of that expert
  // alone at batch 1 on the tensor cores; otherwise its CUDA-core kernel), for error bounds.
  bool uses_tensor_cores() const { return tensor_cores_; }

  // y[p, :] = expert[expert_ids[p]] x[x_rows[p], :], see cuda_gemv_experts.
  Status gemv(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count, void* y,
              DType y_dtype, void* stream) const;
  // The same with gpt-oss's activation in the launch (ExpertGemvArgs::swiglu): y BF16
  // [pairs, N / 2]; bias BF16 [count, N] or nullptr.
  Status gemv_swiglu(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count,
                     const uint16_t* bias, float alpha, float limit, uint16_t* y, void* stream) const;
  // The same with a gated MLP's activation in the launch (ExpertGemvArgs::gated): pairs 2j and
  // 2j + 1 are gate and up of out's row j, BF16 [pairs / 2, N]; exchange: gated_exchange(pairs)
  // uint32 zeros, left zero.
  Status gemv_gated(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count,
                    uint32_t* exchange, uint16_t* out, void* stream) const;
  uint64_t gated_exchange(uint64_t pairs) const { return pairs / 2 * geometry_.n; }
  // Whether gemv_gated computes the activation inside the GEMV's own launch (one kernel);
  // false where it takes the plain launch, then the activation's own (the CUDA cores, or where
  // the activation's store would cost the launch blocks a SM): a
  // caller with an activation kernel of its own does better launching that after gemv then.
  Result<bool> gated_in_launch() const;
  // The picked experts dequantized: out [pairs, N, K] of out_dtype (F32, BF16 or F16) holds
  // expert expert_ids[p] as pair p, the values cuda_dequantize gives that matrix, with the ids
  // on the device (nothing synchronizes); an id outside [0, count) gives a NaN matrix.
  // workspace: dequantize_workspace(pairs) bytes of device memory, 16-byte aligned. MXFP4
  // experts only (gpt-oss's stacks); other formats are kUnsupported. At most 65535 pairs, and
  // pairs x padded N x padded K below 2^34 codes (one dequant launch), a call.
  Status dequantize(const int32_t* expert_ids, uint64_t pairs, void* workspace, void* out, DType out_dtype, void* stream) const;
  // Whether dequantize takes this set (kUnsupported, saying why, where not): the one answer
  // dequantize, dequantize_workspace and callers sizing buffers go by.
  Status dequantize_support() const;
  uint64_t dequantize_workspace(uint64_t pairs) const;  // 0 where dequantize_support() fails

 private:
  ExpertSet() = default;
  void release();
  Status checked_args(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count, void* y,
                      ExpertGemvArgs& a) const;

  ExpertMatrix* device_ = nullptr;
  int ordinal_ = 0;
  uint64_t count_ = 0;
  QuantView geometry_{};
  LaunchConfig launch_{};
  bool tensor_cores_ = false;
  bool planes_uniform_ = true;  // every expert's MXFP4 codes in one order (QuantView::codes_planes): dequantize needs it
};

}  // namespace iris
