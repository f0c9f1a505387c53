#include "kernels/expert_set.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/cuda_check.h"
#include "kernels/decode_ops.h"
#include "kernels/device_guard.h"
#include "kernels/expert_gather.h"
#include "kernels/gemv_mma.h"

namespace iris {

namespace {

// The fields the kernel's launch shape and code depend on: equal for every expert of a set
// (the NF4 kernel reads a precomputed BF16 absmax where the set's first tensor has one).
bool same_geometry(const QuantView& a, const QuantView& b) {
  return a.format == b.format && a.n == b.n && a.k == b.k && a.tiled == b.tiled && a.tile_n == b.tile_n && a.tile_k == b.tile_k &&
         a.padded_n == b.padded_n && a.padded_k == b.padded_k && (a.absmax_bf16 == nullptr) == (b.absmax_bf16 == nullptr);
}

}  // namespace

Result<ExpertSet> ExpertSet::create(const std::vector<QuantView>& views, int device, const LaunchConfig& launch) {
  if (views.empty()) return invalid_argument("expert set: no tensors");
  std::vector<ExpertMatrix> experts;
  if (views.size() == 1) {
    const QuantView& stack = views[0];
    if (!stack.tiled) return unsupported("expert set: the experts' codes are not tiled");
    const uint64_t matrices = stack.n ? stack.rows / stack.n : 0;
    for (uint64_t m = 0; m < matrices; ++m) experts.push_back({stack, m});
  } else {
    for (size_t i = 0; i < views.size(); ++i) {
      const QuantView& v = views[i];
      if (!v.tiled) return unsupported("expert set: tensor " + std::to_string(i) + " is not tiled");
      if (v.rows != v.n) return invalid_argument("expert set: tensor " + std::to_string(i) + " holds several matrices; pass a stack alone");
      if (!same_geometry(v, views[0]))
        return invalid_argument("expert set: tensor " + std::to_string(i) + " differs from tensor 0 in format, shape, tiles or NF4 absmax form");
      experts.push_back({v, 0});
    }
  }
  if (experts.size() > uint64_t(INT32_MAX)) return invalid_argument("expert set: more experts than an int32 index reaches");
  ExpertSet set;
  set.ordinal_ = device;
  set.count_ = experts.size();
  set.geometry_ = views[0];
  set.geometry_.rows = set.geometry_.n;
  set.launch_ = launch;
  // Every expert must take the tensor-core kernel (separate tensors may differ in NF4 block
  // size or FP8 scale granularity, which the kernel reads per expert).
  set.tensor_cores_ = !experts.empty();
  for (const QuantView& v : views) set.planes_uniform_ = set.planes_uniform_ && v.codes_planes == views[0].codes_planes;
  for (const QuantView& v : views) {
    QuantView one = v;
    one.rows = one.n;
    set.tensor_cores_ = set.tensor_cores_ && cuda_gemv_uses_tensor_cores(one, 1, launch);
  }
  if (experts.empty()) return set;
  DeviceGuard g(device);
  if (!g.ok()) return Status::error(ErrorKind::kDevice, "expert set: cannot select device " + std::to_string(device));
  IRIS_CUDA_TRY(cudaMalloc(&set.device_, experts.size() * sizeof(ExpertMatrix)));
  IRIS_CUDA_TRY(cudaMemcpy(set.device_, experts.data(), experts.size() * sizeof(ExpertMatrix), cudaMemcpyHostToDevice));
  return set;
}

ExpertSet::ExpertSet(ExpertSet&& o) noexcept
    : device_(std::exchange(o.device_, nullptr)),
      ordinal_(o.ordinal_),
      count_(o.count_),
      geometry_(o.geometry_),
      launch_(o.launch_),
      tensor_cores_(o.tensor_cores_),
      planes_uniform_(o.planes_uniform_) {}

ExpertSet& ExpertSet::operator=(ExpertSet&& o) noexcept {
  if (this != &o) {
    release();
    device_ = std::exchange(o.device_, nullptr);
    ordinal_ = o.ordinal_;
    count_ = o.count_;
    geometry_ = o.geometry_;
    launch_ = o.launch_;
    tensor_cores_ = o.tensor_cores_;
    planes_uniform_ = o.planes_uniform_;
  }
  return *this;
}

ExpertSet::~ExpertSet() { release(); }

void ExpertSet::release() {
  if (!device_) return;
  DeviceGuard g(ordinal_);
  cudaDeviceSynchronize();  // a kernel may still read the views on a caller's stream
  cudaFree(device_);
  device_ = nullptr;
}

Status ExpertSet::checked_args(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count,
                               void* y, ExpertGemvArgs& a) const {
  if (!expert_ids) return invalid_argument("expert gemv: expert_ids is NULL");
  if (!y) return invalid_argument("expert gemv: y is NULL");
  if (geometry_.k && (!x || x_count == 0)) return invalid_argument("expert gemv: x is NULL or has no rows");
  if (reinterpret_cast<uintptr_t>(x) % 16) return invalid_argument("expert gemv: x must be 16-byte aligned");
  if (count_ == 0) return invalid_argument("expert gemv: the set has no experts");
  a = ExpertGemvArgs{};
  a.experts = device_;
  a.n_experts = uint32_t(count_);
  a.n = geometry_.n;
  a.k = geometry_.k;
  a.tile_n = geometry_.tile_n;
  a.expert_ids = expert_ids;
  a.x_rows = x_rows;
  a.x_count = x_count;
  a.pairs = pairs;
  a.x = x;
  a.y = y;
  return Status::ok();
}

Status ExpertSet::gemv(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count, void* y,
                       DType y_dtype, void* stream) const {
  if (pairs == 0) return Status::ok();
  ExpertGemvArgs a;
  IRIS_TRY(checked_args(expert_ids, x_rows, pairs, x, x_count, y, a));
  DeviceGuard g(ordinal_);
  return cuda_gemv_experts(geometry_, a, y_dtype, tensor_cores_, stream, launch_);
}

Status ExpertSet::gemv_swiglu(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count,
                              const uint16_t* bias, float alpha, float limit, uint16_t* y, void* stream) const {
  // The activation's own checks (the same as its CPU reference's), before anything runs.
  ExpertSwigluArgs check;
  check.n = geometry_.n, check.bias = bias, check.ids = expert_ids, check.bias_rows = uint32_t(count_);
  check.alpha = alpha, check.limit = limit;
  IRIS_TRY(check_expert_swiglu(check));
  if (pairs == 0) return Status::ok();
  ExpertGemvArgs a;
  IRIS_TRY(checked_args(expert_ids, x_rows, pairs, x, x_count, y, a));
  a.swiglu = true, a.swiglu_bias = bias, a.swiglu_alpha = alpha, a.swiglu_limit = limit;
  DeviceGuard g(ordinal_);
  return cuda_gemv_experts(geometry_, a, DType::kBF16, tensor_cores_, stream, launch_);
}

Result<bool> ExpertSet::gated_in_launch() const {
  if (!tensor_cores_ || count_ == 0) return false;
  DeviceGuard g(ordinal_);
  bool in_launch = false;
  IRIS_TRY(cuda_experts_gated_in_launch(geometry_, launch_, &in_launch));
  return in_launch;
}

Status ExpertSet::gemv_gated(const int32_t* expert_ids, const int32_t* x_rows, uint64_t pairs, const uint16_t* x, uint64_t x_count,
                             uint32_t* exchange, uint16_t* out, void* stream) const {
  if (pairs % 2) return invalid_argument("gated expert gemv: " + std::to_string(pairs) + " pairs (gate and up pairs come two by two)");
  if (pairs == 0) return Status::ok();
  if (!out || !exchange) return invalid_argument("gated expert gemv: out and exchange must not be NULL");
  // out is written while other blocks still swap into the exchange: the two must not overlap.
  const uintptr_t e0 = reinterpret_cast<uintptr_t>(exchange), e1 = e0 + 4 * gated_exchange(pairs);
  const uintptr_t o0 = reinterpret_cast<uintptr_t>(out), o1 = o0 + 2 * gated_exchange(pairs);
  if (o0 < e1 && e0 < o1) return invalid_argument("gated expert gemv: out overlaps the exchange");
  ExpertGemvArgs a;
  IRIS_TRY(checked_args(expert_ids, x_rows, pairs, x, x_count, exchange, a));  // y: unused by the launch
  a.gated = true, a.gated_out = out, a.gated_exchange = exchange;
  DeviceGuard g(ordinal_);
  return cuda_gemv_experts(geometry_, a, DType::kBF16, tensor_cores_, stream, launch_);
}

Status ExpertSet::dequantize_support() const {
  if (geometry_.format != ViewFormat::kMxfp4 || !geometry_.tiled)
    return unsupported("expert dequantize: MXFP4 experts only (the picked matrices are gathered by their codes and E8M0 scales)");
  if (!planes_uniform_)
    return unsupported("expert dequantize: the experts' codes are in different orders (tensors of uploads with different settings)");
  return Status::ok();
}

uint64_t ExpertSet::dequantize_workspace(uint64_t pairs) const {
  if (!dequantize_support().is_ok()) return 0;
  return pairs * (matrix_code_bytes(geometry_) + mxfp4_matrix_scale_bytes(geometry_));
}

Status ExpertSet::dequantize(const int32_t* expert_ids, uint64_t pairs, void* workspace, void* out, DType out_dtype, void* stream) const {
  IRIS_TRY(dequantize_support());
  if (pairs == 0) return Status::ok();
  if (!expert_ids || !workspace || !out) return invalid_argument("expert dequantize: expert_ids, workspace and out must not be NULL");
  if (count_ == 0) return invalid_argument("expert dequantize: the set has no experts");
  // One dequant launch takes fewer than 2^31 items of 8 codes (the gather checks its own limit).
  if (pairs * (matrix_code_bytes(geometry_) / 4) >= (uint64_t(1) << 31))
    return invalid_argument("expert dequantize: " + std::to_string(pairs) + " pairs in one call, more codes than one launch takes");
  DeviceGuard g(ordinal_);
  if (!g.ok()) return Status::error(ErrorKind::kDevice, "expert dequantize: cannot select device " + std::to_string(ordinal_));
  auto* ws = static_cast<uint8_t*>(workspace);
  IRIS_TRY(cuda_gather_mxfp4_experts(device_, uint32_t(count_), geometry_, expert_ids, pairs, ws, stream));
  // The gathered matrices as one [pairs, N, K] stack in the experts' layout and code order.
  QuantView v = geometry_;
  v.rows = pairs * geometry_.n;
  v.single_matrix = pairs == 1;
  v.codes = ws;
  v.scales = ws + pairs * matrix_code_bytes(geometry_);
  return cuda_dequantize(v, out, out_dtype, stream, launch_);
}

}  // namespace iris
