// Host launcher of the dequantization kernels: one launch per tensor, any format.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/fp8.cuh"
#include "kernels/kernels.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // items per thread per step: loads issued together, then decoded

template <int OutKind, int N>
__device__ __forceinline__ void store(void* out, uint64_t o, const float (&vals)[N], int count) {
  if constexpr (OutKind == 0) dev::store_bf16(static_cast<uint16_t*>(out) + o, vals, count);
  else if constexpr (OutKind == 1) dev::store_f16(static_cast<uint16_t*>(out) + o, vals, count);
  else dev::store_f32(static_cast<float*>(out) + o, vals, count);
}

// v2: walks the codes in storage order, so each warp loads one contiguous run of code bytes
// and, within a tile row, stores one contiguous run of outputs. Tile coordinates come from
// 32-bit arithmetic on the item index; padding items are skipped.
template <typename F, int OutKind>
__global__ void __launch_bounds__(kThreads) dequant_tiled(const QuantView v, void* out) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  constexpr uint32_t kItemBytes = F::kItem * F::kBits / 8;
  const uint32_t ipr = uint32_t(v.tile_k / F::kItem);   // items per tile row
  const uint32_t ipt = ipr * uint32_t(v.tile_n);         // items per tile
  const uint32_t tps = uint32_t(v.padded_k / v.tile_k);  // tiles per stripe
  const uint32_t tpm = tps * uint32_t(v.padded_n / v.tile_n);  // tiles per matrix
  const uint64_t total = uint64_t(tpm) * (v.rows / v.n) * ipt;
  const uint64_t step = uint64_t(gridDim.x) * kThreads * kUnroll;
  for (uint64_t base = uint64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < total; base += step) {
    typename F::Word w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t it = base + uint64_t(u) * kThreads;
      if (it < total) w[u] = F::load(v, it * kItemBytes);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t it = base + uint64_t(u) * kThreads;
      if (it >= total) break;
      const uint64_t tile = it / ipt;
      const uint32_t j = uint32_t(it - tile * ipt);
      const uint64_t b = tile / tpm;
      const uint32_t tm = uint32_t(tile - b * tpm);
      const uint32_t s = tm / tps, t = tm - s * tps;
      const uint32_t r = j / ipr, c = j - r * ipr;
      const uint64_t n = uint64_t(s) * v.tile_n + r;
      const uint64_t k0 = uint64_t(t) * v.tile_k + uint64_t(c) * F::kItem;
      if (n >= v.n || k0 >= v.k) continue;  // padding
      const uint64_t row = b * v.n + n;
      float vals[F::kItem];
      F::decode_word(v, tables, row, k0, w[u], vals);
      store<OutKind>(out, row * v.k + k0, vals, int(min(uint64_t(F::kItem), v.k - k0)));
    }
  }
}

// v3: one tile per block iteration. The tile's coordinates come from one set of 32-bit
// divisions per tile instead of two 64-bit divisions per 8-element item (Nsight Compute:
// v2 was instruction-bound, 56-67% SM throughput against 27-30% memory throughput).
// Threads walk the tile's items in storage order; `ipr_shift` = log2(items per tile row).
template <typename F, int OutKind>
__global__ void __launch_bounds__(kThreads) dequant_tile_per_block(const QuantView v, void* out, uint32_t ipr_shift) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  constexpr uint32_t kItemBytes = F::kItem * F::kBits / 8;
  constexpr int kPerThread = 4;
  const uint32_t ipr = 1u << ipr_shift;
  const uint32_t ipt = ipr * uint32_t(v.tile_n);
  const uint32_t tps = uint32_t(v.padded_k / v.tile_k);
  const uint32_t tpm = tps * uint32_t(v.padded_n / v.tile_n);
  const uint32_t tiles = tpm * uint32_t(v.rows / v.n);
  for (uint32_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint32_t b = tile / tpm, tm = tile - b * tpm;
    const uint32_t s = tm / tps, t = tm - s * tps;
    const uint64_t tile_base = uint64_t(tile) * ipt * kItemBytes;
    const uint64_t row0 = uint64_t(b) * v.n + uint64_t(s) * v.tile_n;  // first row of the tile
    const uint32_t n_left = uint32_t(min(uint64_t(v.tile_n), v.n - uint64_t(s) * v.tile_n));
    const uint64_t k_base = uint64_t(t) * v.tile_k;
    for (uint32_t j0 = threadIdx.x; j0 < ipt; j0 += kThreads * kPerThread) {
      typename F::Word w[kPerThread];
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const uint32_t j = j0 + u * kThreads;
        if (j < ipt) w[u] = F::load(v, tile_base + uint64_t(j) * kItemBytes);
      }
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const uint32_t j = j0 + u * kThreads;
        if (j >= ipt) break;
        const uint32_t r = j >> ipr_shift, c = j & (ipr - 1);
        const uint64_t k0 = k_base + uint64_t(c) * F::kItem;
        if (r >= n_left || k0 >= v.k) continue;  // padding
        float vals[F::kItem];
        F::decode_word(v, tables, row0 + r, k0, w[u], vals);
        store<OutKind>(out, (row0 + r) * v.k + k0, vals, int(min(uint64_t(F::kItem), v.k - k0)));
      }
    }
  }
}

// Flat layout (NF4 whose blocks cross rows): the codes are already in element order.
template <typename F, int OutKind>
__global__ void __launch_bounds__(kThreads) dequant_flat(const QuantView v, void* out) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  __syncthreads();
  const uint64_t numel = v.rows * v.k;
  const uint64_t total = (numel + F::kItem - 1) / F::kItem;
  for (uint64_t it = blockIdx.x * uint64_t(kThreads) + threadIdx.x; it < total; it += uint64_t(gridDim.x) * kThreads) {
    const uint64_t i0 = it * F::kItem;
    float vals[F::kItem];
    F::decode_word(v, tables, 0, i0, F::load(v, i0 * F::kBits / 8), vals);
    store<OutKind>(out, i0, vals, int(min(uint64_t(F::kItem), numel - i0)));
  }
}

// log2 of the items per tile row when it is a power of two and a tile fills a block; -1 otherwise.
template <typename F>
int tile_kernel_shift(const QuantView& v) {
  if (!v.tiled) return -1;
  const uint64_t ipr = v.tile_k / F::kItem;
  if (ipr == 0 || (ipr & (ipr - 1)) || ipr * v.tile_n < uint64_t(kThreads)) return -1;
  const uint64_t tiles = (v.padded_k / v.tile_k) * (v.padded_n / v.tile_n) * (v.rows / v.n);
  if (tiles >= (uint64_t(1) << 31)) return -1;
  int sh = 0;
  while ((uint64_t(1) << sh) < ipr) ++sh;
  return sh;
}

template <typename F, int OutKind>
void launch_kind(const QuantView& v, void* out, unsigned blocks, cudaStream_t s) {
  const int sh = tile_kernel_shift<F>(v);
  if (sh >= 0) {
    const uint64_t tiles = (v.padded_k / v.tile_k) * (v.padded_n / v.tile_n) * (v.rows / v.n);
    const unsigned tb = unsigned(std::min<uint64_t>(tiles, uint64_t(blocks) * 4));
    dequant_tile_per_block<F, OutKind><<<tb, kThreads, 0, s>>>(v, out, uint32_t(sh));
  } else if (v.tiled) {
    dequant_tiled<F, OutKind><<<blocks, kThreads, 0, s>>>(v, out);
  } else {
    dequant_flat<F, OutKind><<<blocks, kThreads, 0, s>>>(v, out);
  }
}

template <typename F>
Status launch(const QuantView& v, void* out, DType dt, cudaStream_t s) {
  const uint64_t items = v.tiled ? (v.rows / v.n) * v.padded_n * (v.padded_k / F::kItem) : (v.rows * v.k + F::kItem - 1) / F::kItem;
  if (v.rows == 0 || v.k == 0) return Status::ok();
  if (v.tiled && (v.tile_k / F::kItem) * v.tile_n * (v.padded_k / v.tile_k) * (v.padded_n / v.tile_n) >= (uint64_t(1) << 32))
    return unsupported("dequantize: a matrix of more than 2^32 code items");
  int dev = 0, sms = 0;
  IRIS_CUDA_TRY(cudaGetDevice(&dev));
  IRIS_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // Enough blocks to fill every SM several times over, no more: the loop covers the rest.
  const uint64_t per_block = v.tiled ? uint64_t(kThreads) * kUnroll : kThreads;
  const uint64_t blocks = std::min<uint64_t>((items + per_block - 1) / per_block, uint64_t(sms) * 8);
  if (dt == DType::kBF16) launch_kind<F, 0>(v, out, unsigned(blocks), s);
  else if (dt == DType::kF16) launch_kind<F, 1>(v, out, unsigned(blocks), s);
  else launch_kind<F, 2>(v, out, unsigned(blocks), s);
  IRIS_CUDA_LAUNCHED("dequant");
  return Status::ok();
}

}  // namespace

Status cuda_dequantize(const QuantView& v, void* out, DType dt, void* stream) {
  if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) return unsupported("dequantize: output must be bf16, f16 or f32");
  auto s = static_cast<cudaStream_t>(stream);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, out, dt, s);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, out, dt, s);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, out, dt, s);
  }
  return unsupported("dequantize: unknown format");
}

bool cuda_device_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

std::string cuda_device_name() {
  cudaDeviceProp p;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "?";
  return p.name;
}

}  // namespace iris
