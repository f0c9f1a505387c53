#include "bench/kernels/kernel_bench.h"

#include <array>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "common/checked_math.h"
#include "kernels/cuda_check.h"
#include "kernels/device_info.h"
#include "kernels/expert_set.h"
#include "kernels/kernels.h"

namespace iris {

using nlohmann::json;

namespace {

// Random bytes from a counter hash: reproducible, never zeros, generated on the device.
__global__ void fill_random_bytes(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    p[i] = uint8_t(z >> 40);
  }
}

// Maps random bytes onto a realistic value range for each kind of scale.
__global__ void shape_scales(uint8_t* p, uint64_t n, int kind) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    if (kind == 0) p[i] = uint8_t(118 + p[i] % 8);  // E8M0 around 2^-9 .. 2^-2
    else if (kind == 3) p[i] = uint8_t(0x30 + p[i] % 16);  // E4M3 in [0.5, 2): NVFP4 block scales
    else if (kind == 1 && i % 4 == 0) {            // f32 in [1e-4, 1.1e-3)
      float v = 1e-4f + float(p[i]) * 4e-6f;
      *reinterpret_cast<float*>(p + i) = v;
    } else if (kind == 2 && i % 2 == 0) {          // bf16 activations in (-1, 1)
      float v = (float(p[i]) - 127.5f) / 128.0f;
      *reinterpret_cast<uint16_t*>(p + i) = uint16_t(__float_as_uint(v) >> 16);
    }
  }
}

struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() { if (p) cudaFree(p); }
};

Status fill(void* p, uint64_t n, uint64_t seed, int scale_kind) {
  if (!n) return Status::ok();
  fill_random_bytes<<<1024, 256>>>(static_cast<uint8_t*>(p), n, seed);
  IRIS_CUDA_LAUNCHED("fill");
  if (scale_kind >= 0) shape_scales<<<1024, 256>>>(static_cast<uint8_t*>(p), n, scale_kind);
  IRIS_CUDA_LAUNCHED("shape");
  return Status::ok();
}

// Median microseconds per launch: `launch(i)` enqueues rotation i; R launches per graph.
Result<double> time_graph(int rotations, int warmup, int replays, const std::function<Status(int, cudaStream_t)>& launch) {
  cudaStream_t s;
  IRIS_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> guard(s, [](cudaStream_t x) { cudaStreamDestroy(x); });
  cudaGraph_t graph;
  IRIS_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < rotations; ++i) {
    Status st = launch(i, s);
    if (!st.is_ok()) {
      cudaStreamEndCapture(s, &graph);
      return st;
    }
  }
  IRIS_CUDA_TRY(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  IRIS_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  IRIS_CUDA_TRY(cudaEventCreate(&a));
  IRIS_CUDA_TRY(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) IRIS_CUDA_TRY(cudaGraphLaunch(exec, s));
  std::vector<float> ms;
  for (int i = 0; i < replays; ++i) {
    IRIS_CUDA_TRY(cudaEventRecord(a, s));
    IRIS_CUDA_TRY(cudaGraphLaunch(exec, s));
    IRIS_CUDA_TRY(cudaEventRecord(b, s));
    IRIS_CUDA_TRY(cudaEventSynchronize(b));
    float t;
    IRIS_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]) * 1000.0 / rotations;
}

// A plain 16-byte-per-thread copy: the kernels' own access width, for the ceiling.
__global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

// The floors (`iris bench --floors`, kernels/NOTES.md run v35): the least a kernel moving a
// case's bytes can cost, timed the same way as the kernels (launch ramp and tail included).
// read_floor reads `words` 16-byte words (what a batch-1 GEMV must read), four loads in flight
// per thread; the xor of everything read is stored only if it equals a constant, so the loads
// stay.
__global__ void read_floor(const uint4* __restrict__ src, uint64_t words, uint32_t* sink) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < words; i += 4 * stride) {
    uint4 q[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) q[u] = __ldg(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
  }
  for (; i < words; i += stride) {
    const uint4 q = __ldg(src + i);
    acc ^= q.x ^ q.y ^ q.z ^ q.w;
  }
  if (acc == 0x2545f491u) *sink = acc;
}

// stream_floor reads in_words and writes out_words (a dequant's traffic) interleaved in the
// ratio r ~ out / in: each warp reads 32 consecutive words and writes 32 r, every access
// coalesced, the stores streaming as the dequant's are.
__global__ void stream_floor(const uint4* __restrict__ src, uint64_t in_words, uint4* __restrict__ dst, uint64_t out_words, uint32_t r) {
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warp = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) >> 5, warps = (uint64_t(gridDim.x) * blockDim.x) >> 5;
  const uint64_t units = (in_words + 31) / 32;
  for (uint64_t u = warp; u < units; u += warps) {
    const uint64_t i = u * 32 + lane;
    const uint4 q = i < in_words ? __ldg(src + i) : make_uint4(0, 0, 0, 0);
    for (uint32_t j = 0; j < r; ++j) {
      const uint64_t o = (u * r + j) * 32 + lane;
      if (o < out_words) __stcs(dst + o, make_uint4(q.x ^ j, q.y, q.z, q.w));
    }
  }
  for (uint64_t o = units * r * 32 + warp * 32 + lane; o < out_words; o += warps * 32) __stcs(dst + o, make_uint4(uint32_t(o), 0, 0, 0));
}

struct CopyCeiling {
  double memcpy_gbps, kernel_gbps;
};

Result<CopyCeiling> copy_bandwidth_gbps(int replays, int sms) {
  const uint64_t bytes = 1ull << 30;
  DeviceBuffer src, dst;
  IRIS_CUDA_TRY(cudaMalloc(&src.p, bytes));
  IRIS_CUDA_TRY(cudaMalloc(&dst.p, bytes));
  IRIS_TRY(fill(src.p, bytes, 7, -1));
  IRIS_ASSIGN_OR_RETURN(double us, time_graph(1, 3, replays, [&](int, cudaStream_t s) -> Status {
    IRIS_CUDA_TRY(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }));
  IRIS_ASSIGN_OR_RETURN(double kus, time_graph(1, 3, replays, [&](int, cudaStream_t s) -> Status {
    copy16<<<sms * 8, 256, 0, s>>>(static_cast<const uint4*>(src.p), static_cast<uint4*>(dst.p), bytes / 16);
    IRIS_CUDA_LAUNCHED("copy16");
    return Status::ok();
  }));
  // bytes read + bytes written
  return CopyCeiling{2.0 * double(bytes) / (us * 1e-6) / 1e9, 2.0 * double(bytes) / (kus * 1e-6) / 1e9};
}

int scale_kind_for(const TensorDesc& d, Role role) {
  if (role == Role::kScales) return d.format == Format::kMxfp4 ? 0 : d.format == Format::kNvfp4 ? 3 : 1;
  if (role == Role::kTensorScale) return 1;
  if (role == Role::kNestedAbsmax) return 1;
  if (role == Role::kCodeTable || role == Role::kNestedCodeTable) return 1;
  return -1;
}

}  // namespace

Result<TensorDesc> synthetic_desc(const std::string& format, const std::string& shape, uint64_t tile_n, uint64_t tile_k) {
  TensorDesc d;
  d.name = format + " " + shape;
  std::stringstream ss(shape);
  for (std::string dim; std::getline(ss, dim, 'x');) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(dim.c_str(), &end, 10);
    if (dim.empty() || *end || v == 0) return invalid_argument("synthetic case: bad shape '" + shape + "' (want e.g. 14336x4096)");
    d.shape.push_back(v);
  }
  if (d.shape.size() < 2) return invalid_argument("synthetic case: shape needs at least N x K");
  d.dtype = DType::kBF16;
  const uint64_t n = d.shape[d.shape.size() - 2], k = d.shape.back();
  uint64_t batch = 1;
  for (size_t i = 0; i + 2 < d.shape.size(); ++i) batch *= d.shape[i];
  if (format == "mxfp4") {
    d.format = Format::kMxfp4;
    d.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  } else if (format == "nvfp4") {
    d.format = Format::kNvfp4;
    d.params = {{"block_size", 16}, {"element", "e2m1"}, {"scale_encoding", "e4m3"}, {"nibble_order", "low_first"}, {"tensor_scale", "multiplies"},
                {"negative_zero", false}, {"tensor_scale_shape", std::vector<uint64_t>(d.shape.begin(), d.shape.end() - 2)}};
  } else if (format == "nf4") {
    d.format = Format::kNf4;
    d.params = {{"block_size", 64}, {"double_quant", true}, {"nested_block_size", 256}, {"nested_offset", 0.03125},
                {"nibble_order", "high_first"}, {"quant_state_bytes", 0}};
  } else if (format == "fp8" || format == "fp8-block" || format == "fp8-channel") {
    d.format = Format::kFp8E4M3;
    if (format == "fp8-channel") {
      d.params = {{"scale_granularity", "channel"}, {"scale_dtype", "f32"}, {"scale_shape", std::vector<uint64_t>{batch * n}},
                  {"scale_name", "weight_scale"}};
    } else {
      d.params = {{"scale_granularity", "block"}, {"block_n", 128}, {"block_k", 128}, {"scale_dtype", "f32"},
                  {"scale_shape", std::vector<uint64_t>{batch * iris::ceil_div(n, 128) * iris::ceil_div(k, 128)}},
                  {"scale_name", "weight_scale_inv"}};
    }
  } else {
    return invalid_argument("synthetic case: unknown format '" + format + "' (mxfp4, nvfp4, nf4, fp8, fp8-channel)");
  }
  d.layout = choose_layout(d, tile_n, tile_k);
  if (auto specs = component_specs(d); !specs.is_ok()) return invalid_argument("tile: " + specs.status().message());
  return d;
}

Result<json> run_kernel_bench(const std::vector<BenchCase>& cases, const BenchOptions& o) {
  IRIS_ASSIGN_OR_RETURN(DeviceInfo device, query_device(o.device));
  IRIS_CUDA_TRY(cudaSetDevice(o.device));
  const LaunchConfig launch = device.launch_config(o.variants, o.nf4_bf16_table);
  IRIS_ASSIGN_OR_RETURN(CopyCeiling ceiling, copy_bandwidth_gbps(o.replays, device.sm_count));
  const double copy_gbps = std::max(ceiling.memcpy_gbps, ceiling.kernel_gbps);
  // A result row: its time and bytes, also as GB/s and as a share of the copy ceiling.
  auto row = [copy_gbps](const char* kernel, const std::string& name, int batch, double us, double bytes) {
    const double gbps = bytes / (us * 1e-6) / 1e9;
    return json{{"kernel", kernel}, {"case", name}, {"batch", batch}, {"us", us}, {"bytes", bytes}, {"gbps", gbps}, {"pct_copy", 100.0 * gbps / copy_gbps}};
  };
  json results = json::array();
  for (const auto& c : cases) {
    IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(c.desc));
    uint64_t in_bytes = 0;
    for (const auto& s : specs) in_bytes += s.bytes;
    uint64_t rows = 1, k = c.desc.shape.back();
    for (size_t i = 0; i + 1 < c.desc.shape.size(); ++i) rows *= c.desc.shape[i];
    const uint64_t out_bytes = rows * k * 2;
    // Rotate over enough input sets that a replay never finds the previous one in L2.
    const int rot = int(std::clamp<uint64_t>(iris::ceil_div(2 * device.l2_bytes, std::max<uint64_t>(in_bytes, 1)), 2, 16));
    // With l2_hot every launch of a graph takes set 0, which a replay then finds in L2 where it fits.
    const auto set = [&o](int i) { return o.l2_hot ? 0 : i; };
    std::vector<std::array<DeviceBuffer, kRoleCount>> sets(rot);
    std::vector<DevicePointers> ptrs(rot);
    for (int r = 0; r < rot; ++r)
      for (const auto& s : specs) {
        DeviceBuffer& b = sets[r][int(s.role)];
        IRIS_CUDA_TRY(cudaMalloc(&b.p, std::max<uint64_t>(s.bytes, 16)));
        IRIS_TRY(fill(b.p, s.bytes, 1000 * r + s.bytes, scale_kind_for(c.desc, s.role)));
        ptrs[r][int(s.role)] = b.p;
      }
    std::vector<QuantView> views;
    // NF4 under the declared BF16 table: each block's absmax as one BF16 (QuantView::absmax_bf16),
    // as an upload with that table works it out. The GEMVs then read it (absmax_bytes) in place
    // of the double-quantized absmax and its nested absmax (dq_bytes), and their GB/s say so.
    std::vector<DeviceBuffer> absmax_bf16(rot);
    uint64_t absmax_bytes = 0;
    for (int r = 0; r < rot; ++r) {
      IRIS_ASSIGN_OR_RETURN(QuantView v, make_quant_view(c.desc, ptrs[r]));
      if (o.nf4_bf16_table && o.nf4_absmax_bf16 && o.variants.nf4_scaled != 1 && nf4_absmax_blocks(v) > 0) {
        absmax_bytes = nf4_absmax_blocks(v) * 2;
        IRIS_CUDA_TRY(cudaMalloc(&absmax_bf16[r].p, std::max<uint64_t>(absmax_bytes, 16)));
        IRIS_TRY(cuda_nf4_absmax_bf16(v, static_cast<uint16_t*>(absmax_bf16[r].p), nullptr));
        v.absmax_bf16 = static_cast<const uint16_t*>(absmax_bf16[r].p);
      }
      // MXFP4 codes in the order uploads give them (and the tensor-core GEMVs require).
      if (v.format == ViewFormat::kMxfp4) IRIS_TRY(cuda_mxfp4_to_planes(v, nullptr));
      if (v.format == ViewFormat::kNvfp4) IRIS_TRY(cuda_nvfp4_mark_mma_safe(v));  // as uploads classify its tensor scales
      views.push_back(v);
    }
    IRIS_CUDA_TRY(cudaDeviceSynchronize());
    uint64_t dq_bytes = 0;
    if (absmax_bytes)
      for (const auto& s : specs)
        if (s.role == Role::kAbsmax || s.role == Role::kNestedAbsmax) dq_bytes += s.bytes;
    const uint64_t gemv_in_bytes = in_bytes - dq_bytes + absmax_bytes;
    const int out_rot = out_bytes < 2 * device.l2_bytes ? rot : 1;
    std::vector<DeviceBuffer> outs(out_rot);
    for (auto& b : outs) IRIS_CUDA_TRY(cudaMalloc(&b.p, out_bytes));
    IRIS_ASSIGN_OR_RETURN(double us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
      return cuda_dequantize(views[set(i)], outs[set(i) % out_rot].p, DType::kBF16, s, launch);
    }));
    IRIS_CUDA_TRY(cudaDeviceSynchronize());
    const double bytes = double(in_bytes + out_bytes);
    results.push_back(row("dequant", c.name, 0, us, bytes));
    results.back()["tile"] = std::to_string(c.desc.layout.tile_n) + "x" + std::to_string(c.desc.layout.tile_k);
    if (o.floors) {
      const uint64_t in_words = iris::ceil_div(in_bytes, 16), out_words = out_bytes / 16;
      std::vector<DeviceBuffer> srcs(rot);
      for (int r = 0; r < rot; ++r) {
        IRIS_CUDA_TRY(cudaMalloc(&srcs[r].p, in_words * 16));
        IRIS_TRY(fill(srcs[r].p, in_words * 16, 500 + r, -1));
      }
      DeviceBuffer sink;
      IRIS_CUDA_TRY(cudaMalloc(&sink.p, 16));
      const unsigned grid = unsigned(device.sm_count) * 8;  // 2048 threads per SM: full occupancy
      IRIS_ASSIGN_OR_RETURN(double read_us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
        read_floor<<<grid, 256, 0, s>>>(static_cast<const uint4*>(srcs[set(i)].p), in_words, static_cast<uint32_t*>(sink.p));
        IRIS_CUDA_LAUNCHED("read_floor");
        return Status::ok();
      }));
      const uint32_t ratio = uint32_t(std::max<double>(1.0, std::round(double(out_words) / double(in_words))));
      IRIS_ASSIGN_OR_RETURN(double stream_us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
        stream_floor<<<grid, 256, 0, s>>>(static_cast<const uint4*>(srcs[set(i)].p), in_words, static_cast<uint4*>(outs[set(i) % out_rot].p),
                                          out_words, ratio);
        IRIS_CUDA_LAUNCHED("stream_floor");
        return Status::ok();
      }));
      IRIS_CUDA_TRY(cudaDeviceSynchronize());
      results.push_back(row("floor-read", c.name, 0, read_us, double(in_words * 16)));
      results.push_back(row("floor-stream", c.name, 0, stream_us, double(in_words + out_words) * 16));
    }
    for (int batch : c.batches) {
      std::vector<DeviceBuffer> xs(rot), ys(rot);
      for (int r = 0; r < rot; ++r) {
        IRIS_CUDA_TRY(cudaMalloc(&xs[r].p, uint64_t(batch) * k * 2));
        IRIS_TRY(fill(xs[r].p, uint64_t(batch) * k * 2, 77 + r, 2));
        IRIS_CUDA_TRY(cudaMalloc(&ys[r].p, uint64_t(batch) * rows * 2));
      }
      IRIS_ASSIGN_OR_RETURN(double g_us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
        return cuda_gemv(views[set(i)], static_cast<const uint16_t*>(xs[set(i)].p), batch, ys[set(i)].p, DType::kBF16, s, launch);
      }));
      IRIS_CUDA_TRY(cudaDeviceSynchronize());
      const double gb = double(gemv_in_bytes + uint64_t(batch) * (k + rows) * 2);
      results.push_back(row("gemv", c.name, batch, g_us, gb));
      results.back()["path"] = cuda_gemv_uses_tensor_cores(views[0], batch, launch) ? "tensor-cores" : "cuda-cores";
    }
    // An expert stack ([E, N, K]): the grouped expert GEMV of one decoding token routed to
    // 4 distinct experts (gpt-oss's top-4), bytes counted on the selected experts alone. A
    // stack of 2 or 3 takes every matrix once: 2x14336x4096 is the launch a Llama-shaped model
    // runs for its gate and up projections together.
    if (c.desc.shape.size() == 3 && c.desc.layout.kind == LayoutKind::kTiled && c.desc.shape[0] >= 2) {
      const uint64_t e = c.desc.shape[0], n = c.desc.shape[1];
      const int pairs = int(std::min<uint64_t>(4, e));
      std::vector<int32_t> ids(pairs);  // evenly spread: 0, E/4, E/2, 3E/4; every matrix of a smaller stack
      for (int i = 0; i < pairs; ++i) ids[i] = int32_t(uint64_t(i) * e / uint64_t(pairs));
      DeviceBuffer d_ids, x, y;
      IRIS_CUDA_TRY(cudaMalloc(&d_ids.p, pairs * 4));
      IRIS_CUDA_TRY(cudaMemcpy(d_ids.p, ids.data(), pairs * 4, cudaMemcpyHostToDevice));
      IRIS_CUDA_TRY(cudaMalloc(&x.p, k * 2));
      IRIS_TRY(fill(x.p, k * 2, 91, 2));
      IRIS_CUDA_TRY(cudaMalloc(&y.p, pairs * n * 2));
      std::vector<ExpertSet> sets_e;
      for (int r = 0; r < rot; ++r) {
        IRIS_ASSIGN_OR_RETURN(ExpertSet es, ExpertSet::create({views[r]}, o.device, launch));
        sets_e.push_back(std::move(es));
      }
      std::vector<int32_t> rows_zero(pairs, 0);
      DeviceBuffer d_rows;
      IRIS_CUDA_TRY(cudaMalloc(&d_rows.p, pairs * 4));
      IRIS_CUDA_TRY(cudaMemcpy(d_rows.p, rows_zero.data(), pairs * 4, cudaMemcpyHostToDevice));
      IRIS_ASSIGN_OR_RETURN(double e_us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
        return sets_e[set(i)].gemv(static_cast<const int32_t*>(d_ids.p), static_cast<const int32_t*>(d_rows.p), pairs,
                              static_cast<const uint16_t*>(x.p), 1, y.p, DType::kBF16, s);
      }));
      IRIS_CUDA_TRY(cudaDeviceSynchronize());
      const double eb = double(gemv_in_bytes) * pairs / double(e) + double(k * 2 + pairs * n * 2);
      results.push_back(row("gemv_experts", c.name + " top-" + std::to_string(pairs), pairs, e_us, eb));
      results.back()["path"] = sets_e[0].uses_tensor_cores() ? "tensor-cores" : "cuda-cores";
      // The same launch with gpt-oss's activation in it (ExpertSet::gemv_swiglu, a bias of
      // zeros): what the activation adds to the launch (kernels/NOTES.md run v56). Not with a
      // probe, which has no activation.
      if (n % 2 == 0 && !o.variants.gemv_probe) {
        DeviceBuffer bias;
        IRIS_CUDA_TRY(cudaMalloc(&bias.p, e * n * 2));
        IRIS_CUDA_TRY(cudaMemset(bias.p, 0, e * n * 2));
        IRIS_ASSIGN_OR_RETURN(double a_us, time_graph(rot, o.warmup, o.replays, [&](int i, cudaStream_t s) -> Status {
          return sets_e[set(i)].gemv_swiglu(static_cast<const int32_t*>(d_ids.p), static_cast<const int32_t*>(d_rows.p), pairs,
                                       static_cast<const uint16_t*>(x.p), 1, static_cast<const uint16_t*>(bias.p), 1.702f, 7.0f,
                                       static_cast<uint16_t*>(y.p), s);
        }));
        IRIS_CUDA_TRY(cudaDeviceSynchronize());
        results.push_back(row("gemv_experts_swiglu", c.name + " top-" + std::to_string(pairs), pairs, a_us, eb + double(pairs * n * 2)));
        results.back()["path"] = sets_e[0].uses_tensor_cores() ? "tensor-cores" : "cuda-cores";
      }
    }
  }
  return json{{"device", device.name}, {"sms", device.sm_count}, {"l2_bytes", device.l2_bytes}, {"l2_hot", o.l2_hot},
              {"copy_gbps", copy_gbps}, {"copy_memcpy_gbps", ceiling.memcpy_gbps}, {"copy_kernel_gbps", ceiling.kernel_gbps},
              {"results", results}};
}

Status parse_kernel_variant(const std::string& name, const std::string& value, BenchOptions* o) {
  KernelVariants* v = &o->variants;
  auto bad = [&] { return invalid_argument("kernel variant " + name + "=" + value + ": unknown variant or value"); };
  // "auto" (0) or a count lo..hi, into *out; false for anything else.
  auto count = [&](int lo, int hi, int* out) {
    if (value == "auto") {
      *out = 0;
      return true;
    }
    if (value.empty() || value.size() > 2 || value.find_first_not_of("0123456789") != std::string::npos) return false;
    const int n = std::stoi(value);
    if (n < lo || n > hi) return false;
    *out = n;
    return true;
  };
  if (name == "dequant-unroll") {
    if (value != "auto" && value != "1" && value != "2" && value != "4" && value != "8") return bad();
    v->dequant_unroll = value == "auto" ? 0 : std::stoi(value);
  } else if (name == "dequant-item") {  // elements per item of the BF16 dequant
    if (value != "auto" && value != "8" && value != "16") return bad();
    v->dequant_words = value == "auto" ? 0 : std::stoi(value) / 8;
  } else if (name == "gemv") {
    if (value != "auto" && value != "cuda-cores") return bad();
    v->gemv_tensor_cores = value == "auto";
  } else if (name == "gemv-unroll") {
    if (value != "auto" && value != "1" && value != "2") return bad();
    v->gemv_unroll = value == "auto" ? 0 : std::stoi(value);
  } else if (name == "gemv-prefetch") {  // the next chunk's codes and scales in flight
    if (value != "auto" && value != "off" && value != "on") return bad();
    v->gemv_prefetch = value == "auto" ? 0 : value == "off" ? 1 : 2;
  } else if (name == "programmatic") {  // tensor-core GEMVs launched as programmatic dependents (sm_90)
    if (value != "auto" && value != "off" && value != "on" && value != "late") return bad();
    v->programmatic = value == "auto" ? 0 : value == "off" ? 1 : value == "on" ? 2 : 3;
  } else if (name == "gemv-l2-prefetch") {  // each block's stripe asked of L2 first (sm_90)
    if (value != "auto" && value != "off" && value != "on") return bad();
    v->gemv_l2_prefetch = value == "auto" ? 0 : value == "off" ? 1 : 2;
  } else if (name == "gemv-spread") {  // one-wave launches held to ceil(blocks / SMs) blocks a SM
    if (value != "auto" && value != "off" && value != "on") return bad();
    v->gemv_spread = value == "auto" ? 0 : value == "off" ? 1 : 2;
  } else if (name == "gemv-blocks") {  // at most N blocks a SM (unused shared memory)
    if (!count(1, 32, &v->gemv_blocks)) return bad();
  } else if (name == "gemv-warps") {
    if (!count(1, 16, &v->gemv_warps)) return bad();
  } else if (name == "fp8-decode") {
    if (value != "auto" && value != "cvt" && value != "bits") return bad();
    v->fp8_decode = value == "auto" ? 0 : value == "cvt" ? 1 : 2;
  } else if (name == "gemv-probe") {  // a measurement aid: the GEMV without its decode (wrong outputs)
    if (value != "off" && value != "skip-decode" && value != "nf4-skip-absmax" && value != "nf4-skip-table")
      return bad();
    v->gemv_probe = value == "skip-decode"       ? 1
                    : value == "nf4-skip-absmax" ? 2
                    : value == "nf4-skip-table"  ? 3
                                                 : 0;
  } else if (name == "dequant-probe") {  // a measurement aid: the dequant without its decode (wrong outputs)
    if (value != "off" && value != "skip-decode") return bad();
    v->dequant_probe = value == "skip-decode";
  } else if (name == "nf4-absmax") {  // with nf4-table=bf16: bf16(absmax) a block worked out ahead (as uploads do), or inline
    if (value != "auto" && value != "precomputed" && value != "inline") return bad();
    o->nf4_absmax_bf16 = value != "inline";
  } else if (name == "nf4-lookup") {  // with nf4-table=bf16 and nf4-scaled=on: the table in shared memory or in registers
    if (value != "auto" && value != "smem" && value != "permute") return bad();
    v->nf4_lookup = value == "auto" ? 0 : value == "smem" ? 1 : 2;
  } else if (name == "nf4-scaled") {  // with nf4-table=bf16: the absmax on the BF16 weights (on) or the partial sums (off)
    if (value != "auto" && value != "off" && value != "on") return bad();
    v->nf4_scaled = value == "auto" ? 0 : value == "off" ? 1 : 2;
  } else if (name == "nf4-chunk") {  // with nf4-table=bf16 and nf4-scaled=off
    if (value != "auto" && value != "64" && value != "128") return bad();
    v->nf4_chunk = value == "64" ? 1 : value == "128" ? 2 : 0;
  } else if (name == "nf4-table") {
    if (value != "auto" && value != "split" && value != "pairs" && value != "bf16") return bad();
    v->nf4_table = value == "split" ? 1 : value == "pairs" ? 2 : 0;
    o->nf4_bf16_table = value == "bf16";  // the declared precision (LaunchConfig::nf4_bf16_table), not a variant
  } else {
    return bad();
  }
  return Status::ok();
}

}  // namespace iris
