// Fused dequant-GEMV on the tensor cores: y[b, row] = sum_k x[b, k] * W[row, k], batch 1..16,
// for 16-row stripes (tile_n = 16) whose tiles are whole 64-column chunks.
//
// One block of kWarps warps per stripe; warp w takes the stripe's 64-column chunks w,
// w + kWarps, ... so the block's warps read each tile together. Per chunk a lane (group g =
// lane / 4, t = lane % 4) loads columns [16t, 16t + 16) of stripe rows g and g + 8 (8 bytes
// of 4-bit codes, 16 of FP8), decodes them into BF16 pairs and issues four
// mma.m16n8k16 (BF16 inputs, FP32 accumulation) per 8 batch rows.
//
// The k order inside an mma is permuted, identically for A (weights) and B (activations):
// the mma's k slots {2t, 2t+1, 2t+8, 2t+9} of step i hold columns 16t + 4i + {0, 1, 2, 3}.
// A dot product does not depend on the order of its terms, and this way each lane's codes
// and activations are contiguous in memory.
//
// Exactness of the BF16 operands (verify/gemv_bound.h has the resulting error bound):
//  - MXFP4: e2m1 * 2^(e-127) is exact in BF16 (packed_decode.cuh), so the scale is applied
//    before the mma.
//  - FP8: e4m3 is exact in BF16; the scale (tensor, channel, or a block/group of >= 64
//    columns) is constant over a chunk and multiplies the chunk's FP32 partial sums.
//  - NF4: the 16 table values are FP32; each is split into hi = bf16(t) and lo = bf16(t - hi)
//    (|t - hi - lo| <= 2^-18 |t|), two mmas; the absmax (blocks of >= 64) multiplies the
//    chunk's partial sums, as for FP8.
#include <cuda_bf16.h>

#include "kernels/cuda_check.h"
#include "kernels/fast_div.h"
#include "kernels/fp8.cuh"
#include "kernels/gemv_mma.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nf4.cuh"
#include "kernels/tuning.h"

namespace iris {

namespace {

constexpr int kWarps = 4;
constexpr uint32_t kChunk = 64;  // columns per chunk

struct MmaGeometry {
  FastDiv chunks_per_tile;
  uint32_t chunks;          // per stripe: padded_k / 64
  uint32_t stripes;         // per matrix: padded_n / 16
  uint32_t tile_row_bytes;  // tile_k * bits / 8
  uint32_t tile_bytes;      // 16 rows
  uint64_t stripe_bytes;
  bool vector_x;            // K % 8 == 0 and x 16-byte aligned: activations load 16 bytes at a time
};

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// --- Per-format chunk decoders: a lane's 16 columns of one row -> 8 bf16x2 pairs. ---

struct MmaMxfp4 {
  static constexpr uint32_t kBits = 4;
  static constexpr bool kFactored = false;  // scale applied before the mma
  static constexpr int kSplits = 1;
  using Word = uint2;
  using Aux = uint32_t;  // E8M0 byte

  static __device__ void load_smem(const QuantView&, uint32_t*, float*) {}
  // The scale of columns [kc, kc + 16) (inside one 32-block); 127 (x1) for padding.
  static __device__ __forceinline__ Aux aux(const QuantView& v, const float*, uint64_t row, bool row_ok, uint64_t kc) {
    if (!row_ok || kc >= v.k) return 127u;
    return __ldg(static_cast<const uint8_t*>(v.scales) + row * ((v.k + 31) / 32) + kc / 32);
  }
  static __device__ __forceinline__ void decode(Word w, Aux e, const uint32_t*, uint32_t (&a)[kSplits][8]) {
    if (e == 0xffu) {
#pragma unroll
      for (int i = 0; i < 8; ++i) a[0][i] = 0x7FC07FC0u;
      return;
    }
    const dev::E8m0Factors f = dev::e8m0_factors(e);
    const uint32_t lx = w.x & 0x0F0F0F0Fu, hx = (w.x >> 4) & 0x0F0F0F0Fu;
    const uint32_t ly = w.y & 0x0F0F0F0Fu, hy = (w.y >> 4) & 0x0F0F0F0Fu;
    a[0][0] = dev::apply_e8m0(dev::e2m1_pair_scaled<0>(lx, hx), f);
    a[0][1] = dev::apply_e8m0(dev::e2m1_pair_scaled<1>(lx, hx), f);
    a[0][2] = dev::apply_e8m0(dev::e2m1_pair_scaled<2>(lx, hx), f);
    a[0][3] = dev::apply_e8m0(dev::e2m1_pair_scaled<3>(lx, hx), f);
    a[0][4] = dev::apply_e8m0(dev::e2m1_pair_scaled<0>(ly, hy), f);
    a[0][5] = dev::apply_e8m0(dev::e2m1_pair_scaled<1>(ly, hy), f);
    a[0][6] = dev::apply_e8m0(dev::e2m1_pair_scaled<2>(ly, hy), f);
    a[0][7] = dev::apply_e8m0(dev::e2m1_pair_scaled<3>(ly, hy), f);
  }
};

struct MmaNf4 {
  static constexpr uint32_t kBits = 4;
  static constexpr bool kFactored = true;  // absmax multiplies the chunk's partial sums
  static constexpr int kSplits = 2;        // table value = hi + lo, two BF16s
  using Word = uint2;
  using Aux = float;

  // split[c] = bf16(t) | bf16(t - bf16(t)) << 16; nested[256] = the double-quant table.
  static __device__ void load_smem(const QuantView& v, uint32_t* split, float* nested) {
    for (int i = threadIdx.x; i < 16; i += blockDim.x) {
      const float t = v.code_table[i];
      const __nv_bfloat16 hi = __float2bfloat16_rn(t);
      const __nv_bfloat16 lo = __float2bfloat16_rn(t - __bfloat162float(hi));
      split[i] = uint32_t(__bfloat16_as_ushort(hi)) | (uint32_t(__bfloat16_as_ushort(lo)) << 16);
    }
    if (v.double_quant)
      for (int i = threadIdx.x; i < 256; i += blockDim.x) nested[i] = v.nested_code_table[i];
  }
  // The absmax of the chunk starting at column kc (one block: block_size is a multiple of 64).
  static __device__ __forceinline__ Aux aux(const QuantView& v, const float* nested, uint64_t row, bool row_ok, uint64_t kc) {
    if (!row_ok || kc >= v.k) return 0.f;
    const uint64_t blk = dev::div_by(row * v.k + kc, v.block_size, v.block_shift);
    if (!v.double_quant) return __ldg(static_cast<const float*>(v.scales) + blk);
    const uint8_t q = __ldg(static_cast<const uint8_t*>(v.scales) + blk);
    const float a = __fmul_rn(nested[q], __ldg(v.nested_absmax + dev::div_by(blk, v.nested_block_size, v.nested_shift)));
    return __fadd_rn(a, v.nested_offset);
  }
  static __device__ __forceinline__ void decode(Word w, Aux, const uint32_t* split, uint32_t (&a)[kSplits][8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t word = j < 4 ? w.x : w.y;
      const uint32_t byte = (word >> (8 * (j % 4))) & 0xffu;
      const uint32_t e = split[byte >> 4], o = split[byte & 15u];  // high nibble = even column
      a[0][j] = dev::prmt(e, o, 0x5410u);  // the two hi halves
      a[1][j] = dev::prmt(e, o, 0x7632u);  // the two lo halves
    }
  }
};

struct MmaFp8 {
  static constexpr uint32_t kBits = 8;
  static constexpr bool kFactored = true;
  static constexpr int kSplits = 1;
  using Word = uint4;
  using Aux = float;

  static __device__ void load_smem(const QuantView&, uint32_t*, float*) {}
  static __device__ __forceinline__ Aux aux(const QuantView& v, const float*, uint64_t row, bool row_ok, uint64_t kc) {
    if (!row_ok || kc >= v.k) return 0.f;
    return dev::Fp8::scale_at(v, dev::Fp8::scale_index(v, row, kc));
  }
  // E4M3 -> F16 -> F32 -> BF16: every step exact, NaN stays NaN.
  static __device__ __forceinline__ void decode(Word w, Aux, const uint32_t*, uint32_t (&a)[kSplits][8]) {
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float lo, hi;
      dev::e4m3x2_to_f32(j % 2 ? ws[j / 2] >> 16 : ws[j / 2], lo, hi);
      a[0][j] = dev::pack_bf16x2(lo, hi);
    }
  }
};

template <typename W>
__device__ __forceinline__ W load_word(const uint8_t* p) {
  return __ldg(reinterpret_cast<const W*>(p));
}

// 16 activations x[nb][kc .. kc + 16) as 8 bf16x2 pairs; zeros past K or for rows >= batch.
__device__ __forceinline__ void load_x(const uint16_t* __restrict__ x, uint64_t k, bool vector_x, int nb, int batch, uint64_t kc,
                                       uint32_t (&b)[8]) {
  if (nb >= batch || kc >= k) {
#pragma unroll
    for (int i = 0; i < 8; ++i) b[i] = 0;
    return;
  }
  const uint16_t* p = x + uint64_t(nb) * k + kc;
  if (vector_x && kc + 16 <= k) {
    const uint4 q0 = __ldg(reinterpret_cast<const uint4*>(p)), q1 = __ldg(reinterpret_cast<const uint4*>(p + 8));
    b[0] = q0.x; b[1] = q0.y; b[2] = q0.z; b[3] = q0.w;
    b[4] = q1.x; b[5] = q1.y; b[6] = q1.z; b[7] = q1.w;
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t lo = kc + 2 * i < k ? p[2 * i] : 0u, hi = kc + 2 * i + 1 < k ? p[2 * i + 1] : 0u;
    b[i] = lo | (hi << 16);
  }
}

template <typename P, int NT, bool OutF32, int U>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma_kernel(const QuantView v, const MmaGeometry g, const uint16_t* __restrict__ x,
                                                               int batch, void* y) {
  __shared__ uint32_t split[16];
  __shared__ float nested[256];
  __shared__ float partial[kWarps][NT][32][4];
  P::load_smem(v, split, nested);
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gi = lane >> 2, ti = lane & 3;
  const uint32_t stripe = blockIdx.x;
  const uint32_t b_mat = stripe / g.stripes, s = stripe - b_mat * g.stripes;
  const uint64_t n_g = uint64_t(s) * 16 + gi, n_h = n_g + 8;
  const bool ok_g = n_g < v.n, ok_h = n_h < v.n;
  const uint64_t row_g = uint64_t(b_mat) * v.n + n_g, row_h = row_g + 8;
  const uint8_t* base = v.codes + uint64_t(stripe) * g.stripe_bytes + gi * g.tile_row_bytes + ti * (16 * P::kBits / 8);
  const uint32_t h_off = 8 * g.tile_row_bytes;

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  for (uint32_t c0 = warp; c0 < g.chunks; c0 += kWarps * U) {
    typename P::Word wg[U], wh[U];
    typename P::Aux ag[U], ah[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t c = c0 + u * kWarps;
      if (c >= g.chunks) break;
      const uint32_t tile = g.chunks_per_tile.div(c), sub = c - tile * g.chunks_per_tile.d;
      const uint8_t* p = base + tile * g.tile_bytes + sub * (kChunk * P::kBits / 8);
      wg[u] = load_word<typename P::Word>(p);
      wh[u] = load_word<typename P::Word>(p + h_off);
      const uint64_t kc = uint64_t(c) * kChunk + (P::kFactored ? 0 : 16 * ti);
      ag[u] = P::aux(v, nested, row_g, ok_g, kc);
      ah[u] = P::aux(v, nested, row_h, ok_h, kc);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t c = c0 + u * kWarps;
      if (c >= g.chunks) break;
      const uint64_t kc = uint64_t(c) * kChunk + 16 * ti;
      uint32_t bx[NT][8];
#pragma unroll
      for (int j = 0; j < NT; ++j) load_x(x, v.k, g.vector_x, gi + 8 * j, batch, kc, bx[j]);
      uint32_t a_g[P::kSplits][8], a_h[P::kSplits][8];
      P::decode(wg[u], ag[u], split, a_g);
      P::decode(wh[u], ah[u], split, a_h);
      if constexpr (!P::kFactored) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) mma16816(acc[j], a_g[0][2 * i], a_h[0][2 * i], a_g[0][2 * i + 1], a_h[0][2 * i + 1], bx[j][2 * i], bx[j][2 * i + 1]);
      } else {
        float part[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.f;
#pragma unroll
        for (int sp = 0; sp < P::kSplits; ++sp)
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
              mma16816(part[j], a_g[sp][2 * i], a_h[sp][2 * i], a_g[sp][2 * i + 1], a_h[sp][2 * i + 1], bx[j][2 * i], bx[j][2 * i + 1]);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          acc[j][0] = fmaf(ag[u], part[j][0], acc[j][0]);
          acc[j][1] = fmaf(ag[u], part[j][1], acc[j][1]);
          acc[j][2] = fmaf(ah[u], part[j][2], acc[j][2]);
          acc[j][3] = fmaf(ah[u], part[j][3], acc[j][3]);
        }
      }
    }
  }

  // Sum the warps' partial sums; warp 0 writes. C fragment: c0, c1 = (row g, batch 2t, 2t+1),
  // c2, c3 = (row g + 8, same batch rows), plus 8 per n-tile.
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) partial[warp][j][lane][q] = acc[j][q];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float sum = partial[0][j][lane][q];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) sum += partial[w][j][lane][q];
      const int nb = 8 * j + 2 * ti + (q & 1);
      const bool hrow = q >= 2;
      if (nb >= batch || !(hrow ? ok_h : ok_g)) continue;
      const uint64_t o = uint64_t(nb) * v.rows + (hrow ? row_h : row_g);
      if constexpr (OutF32) static_cast<float*>(y)[o] = sum;
      else static_cast<uint16_t*>(y)[o] = iris::f32_to_bf16(sum);
    }
}

template <typename P, int NT, bool OutF32>
Status launch_u(const QuantView& v, const MmaGeometry& g, const uint16_t* x, int batch, void* y, cudaStream_t s) {
  const unsigned blocks = unsigned((v.rows / v.n) * g.stripes);
  switch (gemv_unroll()) {
    case 1: gemv_mma_kernel<P, NT, OutF32, 1><<<blocks, kWarps * 32, 0, s>>>(v, g, x, batch, y); break;
    case 4: gemv_mma_kernel<P, NT, OutF32, 4><<<blocks, kWarps * 32, 0, s>>>(v, g, x, batch, y); break;
    default: gemv_mma_kernel<P, NT, OutF32, 2><<<blocks, kWarps * 32, 0, s>>>(v, g, x, batch, y); break;
  }
  IRIS_CUDA_LAUNCHED("gemv (tensor cores)");
  return Status::ok();
}

template <typename P>
Status launch_p(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t s) {
  MmaGeometry g;
  g.chunks_per_tile = FastDiv(uint32_t(v.tile_k / kChunk));
  g.chunks = uint32_t(v.padded_k / kChunk);
  g.stripes = uint32_t(v.padded_n / 16);
  g.tile_row_bytes = uint32_t(v.tile_k * P::kBits / 8);
  g.tile_bytes = 16 * g.tile_row_bytes;
  g.stripe_bytes = 16 * v.padded_k * P::kBits / 8;
  g.vector_x = v.k % 8 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
  if (batch <= 8) return f32 ? launch_u<P, 1, true>(v, g, x, batch, y, s) : launch_u<P, 1, false>(v, g, x, batch, y, s);
  return f32 ? launch_u<P, 2, true>(v, g, x, batch, y, s) : launch_u<P, 2, false>(v, g, x, batch, y, s);
}

}  // namespace

bool gemv_mma_supports(const QuantView& v, int batch) {
  if (!v.tiled || v.tile_n != 16 || v.tile_k % kChunk != 0 || batch < 1 || batch > 16) return false;
  if (v.padded_k / kChunk >= (uint64_t(1) << 31) || uint64_t(v.tile_k) * 16 >= (uint64_t(1) << 31)) return false;
  if ((v.rows / v.n) * (v.padded_n / 16) >= (uint64_t(1) << 31)) return false;
  switch (v.format) {
    case ViewFormat::kMxfp4: return true;
    case ViewFormat::kNf4: return v.block_size % kChunk == 0;
    case ViewFormat::kFp8:
      switch (v.granularity) {
        case 0: case 1: return true;                                     // tensor, channel
        case 2: return v.block_k % kChunk == 0;                          // block
        default: return v.group_size % kChunk == 0;                      // group
      }
  }
  return false;
}

Status cuda_gemv_mma(const QuantView& v, const uint16_t* x, int batch, void* y, bool y_f32, void* stream) {
  if (!gemv_mma_supports(v, batch)) return unsupported("gemv: the tensor-core kernel does not take this layout");
  auto s = static_cast<cudaStream_t>(stream);
  switch (v.format) {
    case ViewFormat::kMxfp4: return launch_p<MmaMxfp4>(v, x, batch, y, y_f32, s);
    case ViewFormat::kNf4: return launch_p<MmaNf4>(v, x, batch, y, y_f32, s);
    case ViewFormat::kFp8: return launch_p<MmaFp8>(v, x, batch, y, y_f32, s);
  }
  return unsupported("gemv: unknown format");
}

}  // namespace iris
