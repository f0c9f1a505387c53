// Host launcher of the dequantization kernels: one launch per tensor, any format.
#include <algorithm>
#include <cstring>

#include "kernels/cuda_check.h"
#include "kernels/fast_div.h"
#include "kernels/tuning.h"
#include "kernels/fp8.cuh"
#include "kernels/int_group.h"
#include "kernels/kernels.h"
#include "kernels/launch_cache.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nvfp4.cuh"
#include "kernels/nf4.cuh"

namespace iris {

namespace {

constexpr int kThreads = 256;

template <int OutKind, int N>
__device__ __forceinline__ void store(void* out, uint64_t o, const float (&vals)[N], int count) {
  if constexpr (OutKind == 0) dev::store_bf16(static_cast<uint16_t*>(out) + o, vals, count);
  else if constexpr (OutKind == 1) dev::store_f16(static_cast<uint16_t*>(out) + o, vals, count);
  else dev::store_f32(static_cast<float*>(out) + o, vals, count);
}

// Where item i (kWords code words of 8 elements, in storage order) of a tiled tensor lies: the
// tile, then the row and column inside it, by multiply-shift divisions (fast_div.h) set up
// once on the host.
struct ItemGeometry {
  FastDiv items_per_tile, items_per_row, tiles_per_matrix, tiles_per_stripe;
  uint32_t total;  // items in the tensor, padding included (< 2^31)
  bool vector_out; // 16-byte stores are aligned: K % 8 == 0 and an aligned output pointer
};

// Row and first column of item `it`; false for padding items (never stored).
template <int kElems>
__device__ __forceinline__ bool item_pos(const ItemGeometry& g, uint32_t tile_n, uint32_t tile_k, uint32_t n_rows, uint64_t k, uint32_t it,
                                         uint64_t& row, uint32_t& k0) {
  const uint32_t tile = g.items_per_tile.div(it), j = it - tile * g.items_per_tile.d;
  const uint32_t r = g.items_per_row.div(j), c = j - r * g.items_per_row.d;
  const uint32_t b = g.tiles_per_matrix.div(tile), tm = tile - b * g.tiles_per_matrix.d;
  const uint32_t s = g.tiles_per_stripe.div(tm), t = tm - s * g.tiles_per_stripe.d;
  const uint32_t n = s * tile_n + r;
  k0 = t * tile_k + c * kElems;
  row = uint64_t(b) * n_rows + n;
  return n < n_rows && k0 < k;
}

// kWords consecutive code words of one item in one load (8 or 16 bytes for two words; the
// item's offset is a multiple of that, and components are 16-byte aligned).
template <typename F, int kWords>
__device__ __forceinline__ void load_words(const QuantView& v, uint64_t byte_offset, typename F::Word (&w)[kWords]) {
  if constexpr (kWords == 1) {
    w[0] = F::load(v, byte_offset);
  } else {
    static_assert(kWords == 2 && (sizeof(typename F::Word) == 4 || sizeof(typename F::Word) == 8), "two 4- or 8-byte words");
    if constexpr (sizeof(typename F::Word) == 4) {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(v.codes + byte_offset));
      memcpy(&w[0], &q.x, 4);
      memcpy(&w[1], &q.y, 4);
    } else {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(v.codes + byte_offset));
      const uint2 a = make_uint2(q.x, q.y), b = make_uint2(q.z, q.w);
      memcpy(&w[0], &a, 8);
      memcpy(&w[1], &b, 8);
    }
  }
}

// A measurement aid (KernelVariants::dequant_probe): the item's code word and the first four
// bytes of its scale inputs stored as they are, in place of its eight decoded elements.
template <typename F>
__device__ __forceinline__ uint4 undecoded(const typename F::Word& w, const typename F::Aux& aux) {
  uint32_t words[4] = {0, 0, 0, 0}, scale = 0;
  memcpy(words, &w, sizeof w);
  memcpy(&scale, &aux, sizeof aux < 4 ? sizeof aux : 4);
  return make_uint4(words[0], words[1], words[2], words[3] ^ scale);  // the scale stays a dependency
}

// v4: every thread takes kUnroll items spaced a block apart, so each warp instruction reads
// one contiguous run of codes (128 or 256 bytes) and writes one contiguous run of outputs
// (512 bytes within a tile row). All loads of the kUnroll items, scales included, are issued
// before the first is decoded. BF16 output decodes two elements per instruction
// (packed_decode.cuh); items it declines, and F16/F32 output, take the scalar decoder.
// v37: an item may be kWords = 2 code words (16 elements) sharing one position and one scale
// input, where the host has checked that one scale covers every aligned run of 16
// (dequant_words): the position and scale arithmetic is paid once per 16 elements.
template <typename F, int OutKind, int kUnroll, int kWords, bool kProbe>
__global__ void __launch_bounds__(kThreads) dequant_items(const __grid_constant__ QuantView v, const ItemGeometry g, void* out) {
  __shared__ float tables[16 + 256];
  F::load_tables(v, tables);
  const bool tables_ok = __syncthreads_and(F::tables_finite(v, tables));
  constexpr int kElems = F::kItem * kWords;
  constexpr uint32_t kItemBytes = kElems * F::kBits / 8;
  const uint32_t tile_n = uint32_t(v.tile_n), tile_k = uint32_t(v.tile_k), n_rows = uint32_t(v.n);
  const uint64_t k = v.k;
  for (uint32_t base = blockIdx.x * kThreads * kUnroll; base < g.total; base += gridDim.x * kThreads * kUnroll) {
    typename F::Word w[kUnroll][kWords];
    typename F::Aux aux[kUnroll];
    uint64_t row[kUnroll];
    uint32_t k0[kUnroll];
    uint32_t live = 0;  // bit u: item u is a stored item
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t it = base + u * kThreads + threadIdx.x;
      if (it >= g.total || !item_pos<kElems>(g, tile_n, tile_k, n_rows, k, it, row[u], k0[u])) continue;
      live |= 1u << u;
      load_words<F, kWords>(v, uint64_t(it) * kItemBytes, w[u]);
      if constexpr (OutKind == 0) aux[u] = F::load_aux(v, tables, row[u], k0[u]);
    }
    uint32_t scalar = OutKind == 0 ? 0 : live;  // items for the scalar decoder
    if constexpr (OutKind == 0) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (!(live >> u & 1u)) continue;
        uint4* dst = reinterpret_cast<uint4*>(static_cast<uint16_t*>(out) + row[u] * k + k0[u]);
        if constexpr (kProbe) {
#pragma unroll
          for (int h = 0; h < kWords; ++h) __stcs(dst + h, undecoded<F>(w[u][h], aux[u]));
          continue;  // the probe needs K % 8 == 0 (checked at launch): no partial items
        }
        // Two-word items exist only where K % 16 == 0 (dequant_words), so they are whole.
        uint4 q[kWords];
        bool ok = g.vector_out && k0[u] + kElems <= k;
#pragma unroll
        for (int h = 0; h < kWords; ++h) ok = ok && F::decode_bf16(v, w[u][h], aux[u], tables, tables_ok, q[h]);
        if (ok) {
#pragma unroll
          for (int h = 0; h < kWords; ++h) __stcs(dst + h, q[h]);  // streaming: never re-read
        } else {
          scalar |= 1u << u;
        }
      }
    }
    // The scalar decoder (the CPU reference's arithmetic, canonical NaN) for F16/F32 output and
    // the rare BF16 items the packed path declines: once, outside the unrolled code, from a
    // reload. Inlined per item it made the FP8 kernel 6x larger than the MXFP4 one and 4-8x
    // slower (instruction-cache misses, run v6).
    while (scalar) {
      const uint32_t u = __ffs(scalar) - 1;
      scalar &= scalar - 1;
      const uint32_t it = base + u * kThreads + threadIdx.x;
      uint64_t r;
      uint32_t kk;
      item_pos<kElems>(g, tile_n, tile_k, n_rows, k, it, r, kk);
      for (int h = 0; h < kWords && kk + h * F::kItem < k; ++h) {
        const uint32_t kh = kk + h * F::kItem;
        float vals[F::kItem];
        F::decode_word(v, tables, r, kh, F::load(v, uint64_t(it) * kItemBytes + h * (F::kItem * F::kBits / 8)), vals);
        store<OutKind>(out, r * k + kh, vals, int(min(uint64_t(F::kItem), k - kh)));
      }
    }
  }
}

// Flat layout (NF4 whose blocks cross rows): the codes are already in element order.
template <typename F, int OutKind>
__global__ void __launch_bounds__(kThreads) dequant_flat(const __grid_constant__ QuantView v, void* out) {
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

template <typename F, int OutKind, int kUnroll, int kWords, bool kProbe>
Status launch_items(const QuantView& v, const ItemGeometry& g, void* out, const LaunchConfig& c, cudaStream_t s) {
  const int sms = c.sm_count;
  int per_sm = 0;
  IRIS_CUDA_TRY(blocks_per_sm(c.cache.get(), reinterpret_cast<const void*>(dequant_items<F, OutKind, kUnroll, kWords, kProbe>), kThreads, 0, &per_sm));
  // A grid that fills every SM once; the loop covers the rest (no tail wave).
  const uint64_t need = (uint64_t(g.total) + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  const unsigned blocks = unsigned(std::max<uint64_t>(1, std::min<uint64_t>(need, uint64_t(sms) * std::max(per_sm, 1))));
  dequant_items<F, OutKind, kUnroll, kWords, kProbe><<<blocks, kThreads, 0, s>>>(v, g, out);
  IRIS_CUDA_LAUNCHED("dequant");
  return Status::ok();
}

// The per-format (or requested) items per thread of the tiled dequant.
template <typename F, int OutKind, int kWords, bool kProbe>
Status launch_unrolled(const QuantView& v, const ItemGeometry& g, void* out, const LaunchConfig& c, cudaStream_t s) {
  switch (dequant_unroll(c.variants, v.format, kWords)) {
    case 1: return launch_items<F, OutKind, 1, kWords, kProbe>(v, g, out, c, s);
    case 2: return launch_items<F, OutKind, 2, kWords, kProbe>(v, g, out, c, s);
    case 8: return launch_items<F, OutKind, 8, kWords, kProbe>(v, g, out, c, s);
    default: return launch_items<F, OutKind, 4, kWords, kProbe>(v, g, out, c, s);
  }
}

template <typename F, int OutKind>
Status launch_tiled(const QuantView& v, void* out, const LaunchConfig& c, cudaStream_t s) {
  // Two-word items only for BF16 output, where the packed path shares their scale input.
  const int words = OutKind == 0 ? dequant_words(c.variants, v) : 1;
  const uint64_t ipr = v.tile_k / (F::kItem * words), ipt = ipr * v.tile_n;
  const uint64_t tps = v.padded_k / v.tile_k, tpm = tps * (v.padded_n / v.tile_n);
  const uint64_t total = tpm * (v.rows / v.n) * ipt;
  if (total >= (uint64_t(1) << 31) || v.k >= (uint64_t(1) << 32) || v.n >= (uint64_t(1) << 32))
    return unsupported("dequantize: more than 2^31 code items in one tensor");
  ItemGeometry g;
  g.items_per_tile = FastDiv(uint32_t(ipt));
  g.items_per_row = FastDiv(uint32_t(ipr));
  g.tiles_per_matrix = FastDiv(uint32_t(tpm));
  g.tiles_per_stripe = FastDiv(uint32_t(tps));
  g.total = uint32_t(total);
  g.vector_out = v.k % 8 == 0 && (reinterpret_cast<uintptr_t>(out) & 15u) == 0;
  if constexpr (OutKind == 0) {
    if (c.variants.dequant_probe) {  // a measurement aid (KernelVariants): whole aligned items only
      if (!g.vector_out) return unsupported("dequantize probe: needs K % 8 == 0 and an aligned output");
      return words == 2 ? launch_unrolled<F, 0, 2, true>(v, g, out, c, s) : launch_unrolled<F, 0, 1, true>(v, g, out, c, s);
    }
    if (words == 2) return launch_unrolled<F, 0, 2, false>(v, g, out, c, s);
  }
  return launch_unrolled<F, OutKind, 1, false>(v, g, out, c, s);
}

template <typename F>
Status launch(const QuantView& v, void* out, DType dt, cudaStream_t s, const LaunchConfig& c) {
  if (v.rows == 0 || v.k == 0) return Status::ok();
  const int sms = c.sm_count;
  if (v.tiled) {
    if (dt == DType::kBF16) return launch_tiled<F, 0>(v, out, c, s);
    if (dt == DType::kF16) return launch_tiled<F, 1>(v, out, c, s);
    return launch_tiled<F, 2>(v, out, c, s);
  }
  const uint64_t items = (v.rows * v.k + F::kItem - 1) / F::kItem;
  const unsigned blocks = unsigned(std::min<uint64_t>((items + kThreads - 1) / kThreads, uint64_t(sms) * 8));
  if (dt == DType::kBF16) dequant_flat<F, 0><<<blocks, kThreads, 0, s>>>(v, out);
  else if (dt == DType::kF16) dequant_flat<F, 1><<<blocks, kThreads, 0, s>>>(v, out);
  else dequant_flat<F, 2><<<blocks, kThreads, 0, s>>>(v, out);
  IRIS_CUDA_LAUNCHED("dequant");
  return Status::ok();
}

}  // namespace

Status cuda_dequantize(const QuantView& v, void* out, DType dt, void* stream, const LaunchConfig& c) {
  if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) return unsupported("dequantize: output must be bf16, f16 or f32");
  if (c.sm_count <= 0) return invalid_argument("dequantize: the launch configuration has no SM count");
  auto s = static_cast<cudaStream_t>(stream);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch<dev::Mxfp4>(v, out, dt, s, c);
    case ViewFormat::kNf4: return launch<dev::Nf4>(v, out, dt, s, c);
    case ViewFormat::kFp8: return launch<dev::Fp8>(v, out, dt, s, c);
    case ViewFormat::kIntGroup: return cuda_int_group_dequantize(v, out, dt, s, c.sm_count);
    case ViewFormat::kNvfp4: return launch<dev::Nvfp4>(v, out, dt, s, c);
  }
  return unsupported("dequantize: unknown format");
}


}  // namespace iris
