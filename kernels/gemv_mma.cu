// Fused dequant-GEMV on the tensor cores: y[b, row] = sum_k x[b, k] * W[row, k], batch 1..16,
// for 16-row stripes (tile_n = 16) whose tiles are whole 64-column chunks.
//
// One block per stripe, of as many warps (1..8) as keep all stripes resident in one wave;
// warp w takes the stripe's chunks w, w + warps, ... so the block's warps read each tile
// together. A chunk is 128 columns for MXFP4 and NF4's declared BF16 table, 64 for the exact
// NF4 table and FP8: a lane (group g = lane / 4, t = lane % 4) loads a quarter of it, columns
// [c t, c t + c) with c = chunk / 4, of stripe rows g and g + 8 (16 bytes of MXFP4 and of NF4's
// BF16 table, 8 of the exact NF4 table, 16 of FP8), decodes them into BF16 pairs and issues
// c / 4 mma.m16n8k16 (BF16 inputs, FP32 accumulation) per 8 batch rows.
//
// The k order inside an mma is permuted, identically for A (weights) and B (activations):
// the mma's k slots {2t, 2t+1, 2t+8, 2t+9} of step i hold columns c t + 4i + {0, 1, 2, 3}.
// A dot product does not depend on the order of its terms, and this way each lane's codes
// and activations are contiguous in memory.
//
// Exactness of the BF16 operands (verify/gemv_bound.h has the resulting error bound):
//  - MXFP4: e2m1 * 2^(e-127) is exact in BF16 (packed_decode.cuh), so the scale is applied
//    before the mma.
//  - FP8: e4m3 is exact in BF16; the scale (tensor, channel, or a block/group of >= 64
//    columns) is constant over a chunk and multiplies the chunk's FP32 partial sums.
//  - NF4: the 16 table values are FP32; each is split into hi = bf16(t) and lo = bf16(t - hi)
//    (|t - hi - lo| <= 2^-16 |t|), two mmas; the absmax (blocks of >= 64) multiplies the
//    chunk's partial sums, as for FP8. With the declared BF16 table (a looser bound) each
//    weight is bitsandbytes' bf16(bf16(t) * bf16(absmax)), applied before the mma as MXFP4's
//    scale is (MmaNf4Scaled).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/arch.cuh"
#include "kernels/cuda_check.h"
#include "kernels/decode_math.h"
#include "kernels/e4m3_bits.h"
#include "kernels/fast_div.h"
#include "kernels/fp8.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/launch_cache.h"
#include "kernels/gemv_mma.h"
#include "kernels/gemv_rows.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.h"
#include "kernels/mxfp4.cuh"
#include "kernels/nf4.cuh"
#include "kernels/tuning.h"

// For sm_75 the kernels below are stubs (mma16816 says why), so their helpers go unused there.
#if defined(__CUDA_ARCH__) && !IRIS_ARCH_BF16_MMA
#pragma nv_diag_suppress 177
#endif

namespace iris {

namespace {

// Warps per block (one block per stripe), chosen at launch: at most kMaxWarps, and at most
// kAutoMaxWarps where the launch picks (KernelVariants::gemv_warps forces up to kMaxWarps).
// The prefetch step (U = 0) is bounded for 8-warp blocks (its registers, run v45): a launch of
// more warps takes unroll 1, the same sums.
constexpr int kMaxWarps = 16;
constexpr int kAutoMaxWarps = 8;
constexpr int kPrefetchMaxWarps = 8;
constexpr int threads_bound(int u) { return (u == 0 ? kPrefetchMaxWarps : kMaxWarps) * 32; }

// The warps' C fragments for the block's closing sum (reduce_store) live in dynamic shared
// memory sized to the launch's warps, so that a block holds no more than it uses.
template <int NT>
constexpr uint32_t partial_bytes(int warps) {
  return uint32_t(warps) * NT * 32 * 4 * sizeof(float);
}

struct MmaGeometry {
  FastDiv chunks_per_tile;
  uint32_t chunks;          // per stripe: padded_k / chunk
  uint32_t full_chunks;     // the leading chunks whose columns are all < K (K / chunk): no bounds to check
  uint32_t stripes;         // per matrix: padded_n / 16
  uint32_t tile_row_bytes;  // tile_k * bits / 8
  uint32_t tile_bytes;      // 16 rows
  uint64_t stripe_bytes;
  bool vector_x;            // K % 8 == 0 and x 16-byte aligned: activations load 16 bytes at a time
  uint32_t l2_prefetch;     // bytes of its stripe's codes a block asks L2 for first (l2_prefetch_bytes)
  bool release_late;        // the next kernel may be scheduled once every block has its sums, not once all wait
};

// BF16 mma exists from sm_80. The host never launches these kernels on code built for less
// (cuda_gemv_uses_tensor_cores reads the loaded code's architecture); should one run there
// anyway, it traps rather than return wrong sums. The kernels' bodies are compiled only for
// sm_80 and newer: for sm_75 each is one trap, which takes the sm_75 pass over this file from
// the cost of every variant's body to almost nothing (the release build's total compile work
// is what bounds its time: docs/BENCHMARKS.md, "The first build").
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
#if IRIS_ARCH_BF16_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// --- Per-format chunk decoders: a lane's chunk / 4 columns of one row -> bf16x2 pairs. ---
// Each has a Cursor, what a lane keeps of its row across the stripe's chunks (`cursor`, once
// a stripe), and `aux`, the loads of a chunk's scale inputs from it.

// The cursor of the formats whose scale address is cheap to form at each chunk: the row.
struct RowCursor {
  uint64_t row;
  bool ok;  // false for a padding row
};
struct ByRow {
  using Cursor = RowCursor;
  static __device__ __forceinline__ Cursor cursor(const QuantView&, uint64_t row, bool ok) { return {row, ok}; }
};

struct MmaMxfp4 {
  static constexpr uint32_t kBits = 4;
  static constexpr uint32_t kChunk = 128;   // 32 columns (16 bytes, one scale block) per lane
  static constexpr int kPairs = kChunk / 8;  // bf16x2 pairs per lane and row
  static constexpr bool kFactored = false;  // scale applied before the mma
  static constexpr int kSplits = 1;
  static constexpr int kRuns = 1;          // a lane's columns of a chunk: one contiguous run
  static constexpr int kSplitEntries = 1;  // shared table entries (none used)
  using Word = uint4;
  using Aux = uint32_t;  // E8M0 byte
  using Raw = uint32_t;

  static __device__ void load_smem(const QuantView&, uint32_t*, float*) {}
  static __device__ __forceinline__ Aux finish(const QuantView&, const float*, Raw r) { return r; }
  // A lane row's scales, found once a stripe (run v60): the row's first scale byte (the scales
  // are row-major, one a 32-block), null for a padding row. Before, each chunk formed the
  // index from the row with a 64-bit product.
  struct Cursor {
    const uint8_t* run;
  };
  static __device__ __forceinline__ Cursor cursor(const QuantView& v, uint64_t row, bool ok) {
    return {ok ? static_cast<const uint8_t*>(v.scales) + row * ((v.k + 31) / 32) : nullptr};
  }
  // The scale of columns [kc, kc + 32) (one 32-block); 127 (x1) for padding (the row, or
  // the columns past the matrix: !cols_ok).
  static __device__ __forceinline__ Raw aux(const QuantView&, const float*, const Cursor& r, bool cols_ok, uint64_t kc) {
    return r.run != nullptr && cols_ok ? uint32_t(__ldg(r.run + (kc >> 5))) : 127u;
  }
  // Word by word (chunk_mma's kWordwise): a code word's four pairs of each row, decoded just
  // before the two mma steps that take them.
  static constexpr bool kWordwise = true;
  // The scale's factors. Scale 0xFF (NaN): a NaN factor makes every pair NaN, and so the mma's
  // sums of the row, as the reference's. A select, not a branch: filling the pairs with NaN on
  // a path of their own had the compiler set all 16 to NaN ahead of every chunk's decode (run v50).
  static __device__ __forceinline__ dev::E8m0Factors factors(Aux e, const uint32_t*) {
    dev::E8m0Factors f = dev::e8m0_factors(e);
    if (e == 0xffu) f = {dev::kBf16x2CanonicalNan, 0u};
    return f;
  }
  // The codes in the uploads' bit-plane order (QuantView::codes_planes, which
  // gemv_mma_supports requires; kernels/mxfp4_planes.h): three pairs a shift and an AND, the
  // fourth a shift, an AND, a multiply and an AND, then the scale's multiply -- 13 instructions
  // a word where the archive's nibble order took 19 (counted in the source; run v68).
  template <bool kTwo>
  static __device__ __forceinline__ void decode_planes(uint32_t w, const dev::E8m0Factors& f, uint32_t* p) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      p[j] = dev::mul_bf16x2(mxfp4_planes_pair(w, j), f.first);
      if constexpr (kTwo) p[j] = dev::mul_bf16x2(p[j], f.second);
    }
  }
  static __device__ __forceinline__ void decode_word(uint32_t w, const dev::E8m0Factors& f, uint32_t (&p)[4]) {
    if (f.second == 0) decode_planes<false>(w, f, p);
    else decode_planes<true>(w, f, p);
  }
  // chunk_mma's warp-uniform step (run v60): where no lane's two rows need a second factor
  // (every scale <= 2^1, the blocks of real weights), the whole warp decodes with one multiply
  // a pair. decode_word's per-row test is a predicated second multiply at every pair, issued
  // whether or not it applies: a tenth of the chunk's instructions.
  static constexpr bool kUniformStep = true;
  static __device__ __forceinline__ bool one_factor(const dev::E8m0Factors& f) { return f.second == 0; }
  static __device__ __forceinline__ void decode_word_one(uint32_t w, const dev::E8m0Factors& f, uint32_t (&p)[4]) {
    decode_planes<false>(w, f, p);
  }
  static __device__ __forceinline__ void decode(Word w, Aux& e, const uint32_t*, uint32_t (&a)[kSplits][kPairs]) {
    const dev::E8m0Factors f = factors(e, nullptr);
    // One branch for the lane's 32 columns: scales up to 2^1 (blocks of weights up to 12 in
    // magnitude) take one multiply a pair; larger ones the second factor too.
    if (f.second == 0) decode_words<false>(w, f, a);
    else decode_words<true>(w, f, a);
  }
  template <bool kTwo>
  static __device__ __forceinline__ void decode_words(const Word& w, const dev::E8m0Factors& f, uint32_t (&a)[kSplits][kPairs]) {
    decode_planes<kTwo>(w.x, f, &a[0][0]);
    decode_planes<kTwo>(w.y, f, &a[0][4]);
    decode_planes<kTwo>(w.z, f, &a[0][8]);
    decode_planes<kTwo>(w.w, f, &a[0][12]);
  }
};

// NVFP4 (FORMAT.md 4.6), the archive's nibble order: a lane's 32 columns are two 16-element
// blocks. Each pair is decoded exactly in one multiply: E2M1 onto BF16 bits (e2m1 * 2^-126, a
// PRMT, a multiply and an AND), times the block's E4M3 scale * 2^110 as a BF16 -- E2M1's 2
// significant bits by E4M3's 4 fit BF16's 8, and every product lies in [2^-26, 2^-4.5]: normal
// BF16 -- so the mma sums exact weights * 2^-16. The stripe's sums then take 2^16 (exact) and the
// matrix's FP32 tensor scale, multiplied or divided, once (tensor_factor). The reference rounds
// e4m3 * t to FP32 before the E2M1 multiply instead: the same value within one rounding, well
// inside the GEMV's FP32 bound.
struct MmaNvfp4 {
  static constexpr uint32_t kBits = 4;
  static constexpr uint32_t kChunk = 128;   // 32 columns (16 bytes, two scale blocks) per lane
  static constexpr int kPairs = kChunk / 8;
  static constexpr bool kFactored = false;  // the block scales applied before the mma
  static constexpr bool kWordwise = false;
  static constexpr int kSplits = 1;
  static constexpr int kRuns = 1;
  static constexpr int kSplitEntries = 256;  // every E4M3 byte's factor (scale_pair), looked up a block
  static constexpr bool kTensorScale = true;
  using Word = uint4;
  using Aux = uint32_t;  // the two blocks' E4M3 bytes (bits 0-7, 8-15)
  using Raw = uint32_t;

  static __device__ void load_smem(const QuantView&, uint32_t* table, float*) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) table[i] = scale_pair(uint32_t(i));
  }
  static __device__ __forceinline__ Aux finish(const QuantView&, const float*, Raw r) { return r; }
  struct Cursor {
    const uint8_t* run;  // the row's first scale byte; null for a padding row
  };
  static __device__ __forceinline__ Cursor cursor(const QuantView& v, uint64_t row, bool ok) {
    return {ok ? static_cast<const uint8_t*>(v.scales) + row * ((v.k + 15) / 16) : nullptr};
  }
  // The scales of columns [kc, kc + 16) and [kc + 16, kc + 32); 0x38 (1.0) for padding (the
  // row, or the blocks past K, whose codes are 0 and activations 0: no scale byte is read past
  // the row's last).
  static __device__ __forceinline__ Raw aux(const QuantView& v, const float*, const Cursor& r, bool cols_ok, uint64_t kc) {
    if (r.run == nullptr || !cols_ok) return 0x3838u;
    // Both bytes in one 2-byte load where both blocks lie in K and it is aligned: kc is a
    // multiple of 32, and a row's scale count even keeps every row's first scale on an even byte.
    if (kc + 32 <= v.k && (((v.k + 15) >> 4) & 1) == 0) return __ldg(reinterpret_cast<const uint16_t*>(r.run + (kc >> 4)));
    const uint32_t lo = __ldg(r.run + (kc >> 4));
    const uint32_t hi = kc + 16 < v.k ? uint32_t(__ldg(r.run + (kc >> 4) + 1)) : 0x38u;
    return lo | (hi << 8);
  }
  // An E4M3 byte times 2^110 as a bf16x2 splat (exact: 4 significant bits, exponents 2^101 ..
  // 2^118.8, so the FP32 value's top half); NaN (0x7F, 0xFF) as the canonical NaN, which makes
  // the row's sums NaN as the reference's.
  static __device__ __forceinline__ uint32_t scale_pair(uint32_t b) {
    const float scaled = __fmul_rn(iris::quant::e4m3_to_f32(uint8_t(b)), 0x1p110f);
    const uint32_t bits = (b & 0x7Fu) == 0x7Fu ? 0x7FC0u : __float_as_uint(scaled) >> 16;
    return bits | (bits << 16);
  }
  static __device__ __forceinline__ void decode_word(uint32_t w, uint32_t s, uint32_t* p) {
    const uint32_t lo4 = w & 0x0F0F0F0Fu, hi4 = (w >> 4) & 0x0F0F0F0Fu;
    p[0] = dev::mul_bf16x2(dev::e2m1_pair_scaled<0>(lo4, hi4), s);
    p[1] = dev::mul_bf16x2(dev::e2m1_pair_scaled<1>(lo4, hi4), s);
    p[2] = dev::mul_bf16x2(dev::e2m1_pair_scaled<2>(lo4, hi4), s);
    p[3] = dev::mul_bf16x2(dev::e2m1_pair_scaled<3>(lo4, hi4), s);
  }
  static __device__ __forceinline__ void decode(Word w, Aux& e, const uint32_t* table, uint32_t (&a)[kSplits][kPairs]) {
    const uint32_t s0 = table[e & 0xFFu], s1 = table[(e >> 8) & 0xFFu];
    decode_word(w.x, s0, &a[0][0]);
    decode_word(w.y, s0, &a[0][4]);
    decode_word(w.z, s1, &a[0][8]);
    decode_word(w.w, s1, &a[0][12]);
  }
  // The matrix's tensor scale on a stripe's sums: times t (ModelOpt) or over t
  // (compressed-tensors). A scale the reference cannot decode by -- not finite, or a divisor
  // of 0 -- makes every weight infinite or NaN there: the sums are NaN.
  static __device__ __forceinline__ float tensor_factor(const QuantView& v, uint32_t matrix, bool& divides) {
    const float t = __ldg(v.tensor_scale + matrix);
    divides = v.nvfp4_divides;
    return !isfinite(t) || (divides && t == 0.f) ? __int_as_float(0x7FC00000) : t;
  }
};

// How NF4's 16 table values reach the mma. The exact ones (LaunchConfig::nf4_bf16_table
// false; KernelVariants::nf4_table picks the lookup) keep each FP32 value to 2^-16 as hi + lo
// BF16s, two mmas a fragment; the declared BF16 table (nf4_bf16_table) rounds each to one BF16
// (2^-8 a weight) for one mma and one lookup a byte: with the absmax on the partial sums in
// MmaNf4 (the nf4_scaled=off variant), or as bitsandbytes' own arithmetic in MmaNf4Scaled (the
// default, below).
enum class Nf4Table {
  kSplit,       // 16-entry (hi, lo) table, two lookups a code byte (one bank an entry: conflict-free)
  kSplitPairs,  // the issue-11 variant: a 256-entry table of a byte's two columns as (hi pair, lo pair),
                // one lookup a byte, 2 KB hit at random bytes (bank conflicts)
  kBf16Pairs,   // 256-entry table of a byte's two columns as one bf16x2, a copy per lane (32 KB):
                // one conflict-free lookup a byte, no PRMT
};

// The absmax of each of a chunk's runs (kWide: two 64-column blocks).
template <int kRuns>
struct RunScales {
  float v[kRuns];
};
__device__ __forceinline__ float run_scale(float a, int) { return a; }
template <int kRuns>
__device__ __forceinline__ float run_scale(const RunScales<kRuns>& a, int r) { return a.v[r]; }

// kWide (the BF16 pair table, where tile_k is a multiple of 128): 128-column chunks whose lane
// columns are two runs, [16 t, 16 t + 16) of each 64-column half, so that every mma step stays
// inside one absmax block; the two halves' partial sums get their own absmax. Half the chunks
// of the 64-column kernel, so half its per-chunk work (addresses, loop, activation and scale
// address arithmetic) for the same loads and lookups.
template <Nf4Table kTable, bool kWide = false>
struct MmaNf4 : ByRow {
  static constexpr bool kBf16 = kTable == Nf4Table::kBf16Pairs;
  static_assert(kBf16 || !kWide, "128-column NF4 chunks only with the BF16 table");
  static constexpr uint32_t kBits = 4;
  static constexpr uint32_t kChunk = kWide ? 128 : 64;  // absmax blocks (>= 64 columns) never split a run
  static constexpr int kRuns = kWide ? 2 : 1;           // 16 columns (8 bytes) per lane and run
  static constexpr int kPairs = kChunk / 8;
  static constexpr bool kFactored = true;  // absmax multiplies the chunk's partial sums
  static constexpr bool kWordwise = false;
  static constexpr int kSplits = kBf16 ? 1 : 2;  // table value = hi + lo, two BF16s; or one BF16
  static constexpr int kSplitEntries = kTable == Nf4Table::kSplitPairs ? 512 : kTable == Nf4Table::kBf16Pairs ? 256 * 32 : 16;
  using Word = std::conditional_t<kWide, uint4, uint2>;
  using Aux = std::conditional_t<kWide, RunScales<2>, float>;

  // split[c] = bf16(t) | bf16(t - bf16(t)) << 16 (the BF16 modes: bf16(t) alone); nested[256] =
  // the double-quant table.
  static __device__ __forceinline__ uint32_t split_of(const QuantView& v, uint32_t code) {
    const float t = v.code_table[code];
    const __nv_bfloat16 hi = __float2bfloat16_rn(t);
    if constexpr (kBf16) return uint32_t(__bfloat16_as_ushort(hi));
    const __nv_bfloat16 lo = __float2bfloat16_rn(t - __bfloat162float(hi));
    return uint32_t(__bfloat16_as_ushort(hi)) | (uint32_t(__bfloat16_as_ushort(lo)) << 16);
  }
  // The double-quant map (256 floats), where the tensor has one.
  static __device__ void load_nested(const QuantView& v, float* nested) {
    if (v.double_quant)
      for (int i = threadIdx.x; i < 256; i += blockDim.x) nested[i] = v.nested_code_table[i];
  }
  // with_nested: the double-quant map too (MmaNf4Scaled's precomputed absmax needs none).
  static __device__ void load_smem(const QuantView& v, uint32_t* split, float* nested, bool with_nested = true) {
    if constexpr (kTable == Nf4Table::kSplitPairs) {
      for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        const uint32_t e = split_of(v, uint32_t(i) >> 4), o = split_of(v, uint32_t(i) & 15u);  // high nibble = even column
        split[2 * i] = dev::prmt(e, o, 0x5410u);
        split[2 * i + 1] = dev::prmt(e, o, 0x7632u);
      }
    } else if constexpr (kTable == Nf4Table::kBf16Pairs) {
      // Entry b's copy for lane l at word 32 b + l (bank l), written 4 copies a store.
      for (int i = threadIdx.x; i < 256 * 8; i += blockDim.x) {
        const uint32_t b = uint32_t(i) >> 3;
        const uint32_t p = split_of(v, b >> 4) | (split_of(v, b & 15u) << 16);  // high nibble = even column
        reinterpret_cast<uint4*>(split)[i] = make_uint4(p, p, p, p);
      }
    } else {
      for (int i = threadIdx.x; i < 16; i += blockDim.x) split[i] = split_of(v, uint32_t(i));
    }
    if (with_nested) load_nested(v, nested);
  }
  // The absmax of each run of the chunk starting at column kc (a run lies in one block:
  // block_size is a multiple of 64): its loads with the codes (`aux`), the nested-map lookup
  // at use (`finish`), as dequant does.
  struct Raw {
    dev::Nf4::AbsmaxInputs in[kRuns];
    bool ok[kRuns];  // false for padding rows and columns: absmax 0
  };
  static __device__ __forceinline__ Raw aux(const QuantView& v, const float*, const Cursor& r, bool cols_ok, uint64_t kc) {
    Raw out;
#pragma unroll
    for (int h = 0; h < kRuns; ++h) {
      const uint64_t col = kc + 64 * h;
      out.ok[h] = r.ok && cols_ok && (h == 0 || col < v.k);
      out.in[h] = out.ok[h] ? dev::Nf4::absmax_inputs(v, dev::div_by(r.row * v.k + col, v.block_size, v.block_shift))
                            : dev::Nf4::AbsmaxInputs{0u, 0.f};
    }
    return out;
  }
  static __device__ __forceinline__ Aux finish(const QuantView& v, const float* nested, const Raw& r) {
    if constexpr (kWide) {
      Aux a;
#pragma unroll
      for (int h = 0; h < kRuns; ++h) a.v[h] = r.ok[h] ? dev::Nf4::absmax_of(v, nested, r.in[h]) : 0.f;
      return a;
    } else {
      return r.ok[0] ? dev::Nf4::absmax_of(v, nested, r.in[0]) : 0.f;
    }
  }
  static __device__ __forceinline__ void decode(Word w, Aux&, const uint32_t* split, uint32_t (&a)[kSplits][kPairs]) {
    decode_pairs<kPairs>(w, 0, split, a);
  }
  // Pairs [first, first + N) of the lane's row (chunk_mma decodes a wide chunk run by run).
  template <int N>
  static __device__ __forceinline__ void decode_pairs(const Word& w, int first, const uint32_t* split, uint32_t (&a)[kSplits][N]) {
    constexpr int kWords = sizeof(Word) / 4;
    uint32_t ws[kWords];
    memcpy(ws, &w, sizeof w);
    const uint32_t* lane_table = split + (threadIdx.x & 31);  // kBf16Pairs: this lane's copies
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int j = first + i;
      const uint32_t byte = (ws[j / 4] >> (8 * (j % 4))) & 0xffu;
      if constexpr (kTable == Nf4Table::kSplitPairs) {
        const uint2 pr = reinterpret_cast<const uint2*>(split)[byte];
        a[0][i] = pr.x;
        a[kSplits - 1][i] = pr.y;
      } else if constexpr (kTable == Nf4Table::kBf16Pairs) {
        a[0][i] = lane_table[byte * 32];
      } else {
        const uint32_t e = split[byte >> 4], o = split[byte & 15u];  // high nibble = even column
        a[0][i] = dev::prmt(e, o, 0x5410u);                           // the two hi halves
        a[kSplits - 1][i] = dev::prmt(e, o, 0x7632u);                 // the two lo halves
      }
    }
  }
};

// A word-wise format's whole-chunk decode (the prefetch step's): each code word of w through
// P::decode_word with the row's factors f, its four pairs in order.
template <typename P, typename Word, typename F, int kPairs>
__device__ __forceinline__ void decode_by_words(const Word& w, const F& f, uint32_t (&out)[1][kPairs]) {
  constexpr int kWords = sizeof(Word) / 4;
  uint32_t ws[kWords];
  memcpy(ws, &w, sizeof w);
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    uint32_t p[4];
    P::decode_word(ws[i], f, p);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[0][4 * i + j] = p[j];
  }
}

// NF4 with the declared BF16 table in bitsandbytes' own arithmetic (LaunchConfig::nf4_bf16_table,
// the default kernel for it since run v57): each weight is bf16(bf16(t) * bf16(absmax)), the
// table value and the block's absmax each rounded to BF16 and their product rounded once, as
// bitsandbytes' kgemm_4bit_inference_naive forms `quant_map[code] * local_absmax` in BF16. The
// weights are then scaled before the mma, as MXFP4's are, so the chunk has MXFP4's shape: 128
// columns (32 a lane, 16 bytes a row, inside one absmax block since blocks are multiples of 64
// columns and K of the block), one absmax a lane and row, no partial sums, decoded word by word
// at unroll 1. kChunk 64 (8 bytes a lane and row) where tile_k is not a multiple of 128.
// Per code byte: one lookup in the lane's copy of the 256-entry pair table, one BF16 multiply.
// kPrecomputed: the absmax as QuantView::absmax_bf16 holds it (bf16(absmax) a block, worked out
// once an upload), one 2-byte load a lane and row, in place of the double-quantized inputs and
// their nested lookup at each chunk: the same BF16 factor, so the same sums bit for bit.
template <uint32_t kChunkCols, bool kPrecomputed = false>
struct MmaNf4Scaled : ByRow {
  static constexpr uint32_t kBits = 4;
  static constexpr uint32_t kChunk = kChunkCols;
  static constexpr int kPairs = kChunk / 8;
  static constexpr bool kFactored = false;  // the absmax is in the BF16 weights
  static constexpr bool kWordwise = true;
  static constexpr int kSplits = 1;
  static constexpr int kRuns = 1;
  static constexpr int kSplitEntries = 256 * 32;  // the BF16 pair table, a copy per lane
  using Word = std::conditional_t<kChunk == 128, uint4, uint2>;
  // The absmax (0 for padding): FP32, or its BF16 bits where precomputed.
  using Aux = std::conditional_t<kPrecomputed, uint32_t, float>;
  using Raw = std::conditional_t<kPrecomputed, uint32_t, typename MmaNf4<Nf4Table::kBf16Pairs>::Raw>;

  static __device__ void load_smem(const QuantView& v, uint32_t* split, float* nested) {
    if constexpr (kPrecomputed) {  // the pair table only: the nested map is not read
      MmaNf4<Nf4Table::kBf16Pairs>::load_smem(v, split, nullptr, false);
    } else {
      MmaNf4<Nf4Table::kBf16Pairs>::load_smem(v, split, nested);
    }
  }
  // The absmax of the lane's columns [kc, kc + kChunk / 4) (one block).
  // The row's cursor also holds the flat index of its first element (row * k), formed once a
  // stripe (run v60), where the precomputed absmax's block index used to take a 64-bit product
  // at every chunk.
  struct Cursor : RowCursor {
    uint64_t first;
  };
  static __device__ __forceinline__ Cursor cursor(const QuantView& v, uint64_t row, bool ok) { return {{row, ok}, row * v.k}; }
  static __device__ __forceinline__ Raw aux(const QuantView& v, const float* nested, const Cursor& r, bool cols_ok, uint64_t kc) {
    if constexpr (kPrecomputed) {
      return r.ok && cols_ok ? uint32_t(__ldg(v.absmax_bf16 + dev::div_by(r.first + kc, v.block_size, v.block_shift))) : 0u;
    } else {
      return MmaNf4<Nf4Table::kBf16Pairs>::aux(v, nested, r, cols_ok, kc);
    }
  }
  static __device__ __forceinline__ Aux finish(const QuantView& v, const float* nested, const Raw& r) {
    if constexpr (kPrecomputed) return r;
    else return MmaNf4<Nf4Table::kBf16Pairs>::finish(v, nested, r);
  }
  // The row's factor for chunk_mma's word-by-word step: bf16(absmax) in both halves (a NaN
  // absmax gives a NaN factor, so NaN weights and a NaN row sum, as the reference's), and this
  // lane's table copies.
  struct Factors {
    uint32_t absmax2;
    const uint32_t* lane_table;
  };
  static __device__ __forceinline__ uint32_t absmax_pair(Aux a) {
    uint32_t h;
    if constexpr (kPrecomputed) h = a;
    else h = __bfloat16_as_ushort(__float2bfloat16_rn(a));
    return h | (h << 16);
  }
  static __device__ __forceinline__ Factors factors(Aux a, const uint32_t* split) { return {absmax_pair(a), split + (threadIdx.x & 31)}; }
  // Byte j of w holds columns 2j (high nibble) and 2j + 1; its table entry is their bf16x2 pair.
  static __device__ __forceinline__ void decode_word(uint32_t w, const Factors& f, uint32_t (&p)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = dev::mul_bf16x2(f.lane_table[((w >> (8 * j)) & 0xffu) * 32], f.absmax2);
  }
  static __device__ __forceinline__ void decode(Word w, Aux& a, const uint32_t* split, uint32_t (&out)[kSplits][kPairs]) {
    decode_by_words<MmaNf4Scaled>(w, factors(a, split), out);
  }
};

// NF4 with the declared BF16 table, MmaNf4Scaled's arithmetic and chunks, its lookup done by
// byte permutes on the table held in registers instead of in a shared-memory copy a lane
// (LaunchConfig::variants.nf4_lookup 2). The 16 table values bf16(t) as two byte planes (high
// and low bytes, 4 registers each, entries 4i..4i+3 in register i): a PRMT picks 4 codes' bytes
// among entries 0-7 and another among 8-15, a third, in PRMT's sign mode, makes the mask of
// codes >= 8 from the code bits themselves, and a LOP3 keeps the right one. Then PRMTs pair each
// byte's two columns (high nibble = even column) into the bf16x2 the pair table holds, and the
// same BF16 multiply by the absmax: the same weights, so the same sums bit for bit. It has no
// table, no fill and no shared-memory traffic; by the source's count a code word takes 25
// instructions (14 PRMTs, 4 selects, 4 multiplies, 3 forming the selectors) against the
// table's 16 (4 shared-memory loads, 4 multiplies, 8 forming addresses). Run v62: at equal warps and blocks a SM that trade is even or a loss; what it buys is
// occupancy -- 4-warp blocks at 8 a SM where the table's 32 KB holds 6 -- so a launch takes it
// only where the table binds (table_binds, nf4_register_lookup).
template <uint32_t kChunkCols, bool kPrecomputed = false>
struct MmaNf4Permute : MmaNf4Scaled<kChunkCols, kPrecomputed> {
  using Base = MmaNf4Scaled<kChunkCols, kPrecomputed>;
  // The gated activation's instance held to two blocks of 512 threads a SM (64 registers, the
  // plain instance's): unbounded, ptxas gave it 82 (run v66) and the launch a block a SM fewer,
  // so libiris ran the activation apart; bounded it takes 62 without spilling (sm_90a,
  // `-Xptxas -v`, run v67). With the absmax worked out at upload only: the inline form spills.
  static constexpr int kGatedMinBlocks = kPrecomputed ? 2 : 0;
  using Aux = typename Base::Aux;
  using Word = typename Base::Word;
  static constexpr int kSplitEntries = 1;  // no shared-memory table
  static constexpr int kPairs = Base::kPairs;

  struct Lookup {
    uint32_t hi[4], lo[4];  // byte planes of bf16(t): register i holds entries 4i..4i+3
  };
  static __device__ void load_smem(const QuantView& v, uint32_t*, float* nested) {
    if constexpr (!kPrecomputed) MmaNf4<Nf4Table::kBf16Pairs>::load_nested(v, nested);
  }
  static __device__ __forceinline__ Lookup register_lookup(const QuantView& v) {
    Lookup t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      t.hi[i] = t.lo[i] = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t b = MmaNf4<Nf4Table::kBf16Pairs>::split_of(v, uint32_t(4 * i + j));  // bf16(t) bits
        t.lo[i] |= (b & 0xffu) << (8 * j);
        t.hi[i] |= (b >> 8) << (8 * j);
      }
    }
    return t;
  }
  struct Factors {
    uint32_t absmax2;
    Lookup t;
  };
  static __device__ __forceinline__ Factors factors(Aux a, const Lookup& t) { return {Base::absmax_pair(a), t}; }
  // Byte j of w: columns 2j (high nibble) and 2j + 1. Half h of w (bytes 2h, 2h + 1) as PRMT
  // selectors: nibble k of (w >> 16h) & 0x7777 picks entry (code & 7) of the code in nibble k,
  // i.e. the codes of columns 4h + 1, 4h, 4h + 3, 4h + 2. Their bit 3 is bit 3 of bytes 2h and
  // 2h + 1 (the low nibbles: the sign bit of w << 4's bytes) and bit 7 (the high nibbles: the
  // sign bit of w's), which PRMT's sign mode spreads over each output byte.
  static __device__ __forceinline__ void decode_word(uint32_t w, const Factors& f, uint32_t (&p)[4]) {
    const uint32_t s7 = w & 0x77777777u, w4 = w << 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t sel = h ? s7 >> 16 : s7;
      const uint32_t high8 = dev::prmt(w, w4, h ? 0xBFAEu : 0x9D8Cu);  // 0xFF where the code is >= 8
      const uint32_t hi = (dev::prmt(f.t.hi[0], f.t.hi[1], sel) & ~high8) | (dev::prmt(f.t.hi[2], f.t.hi[3], sel) & high8);
      const uint32_t lo = (dev::prmt(f.t.lo[0], f.t.lo[1], sel) & ~high8) | (dev::prmt(f.t.lo[2], f.t.lo[3], sel) & high8);
      // bytes [lo, hi] of the codes in nibbles 1 and 0 (columns 4h, 4h + 1), then 3 and 2
      p[2 * h] = dev::mul_bf16x2(dev::prmt(lo, hi, 0x4051u), f.absmax2);
      p[2 * h + 1] = dev::mul_bf16x2(dev::prmt(lo, hi, 0x6273u), f.absmax2);
    }
  }
  static __device__ __forceinline__ void decode(Word w, Aux& a, const Lookup& t, uint32_t (&out)[1][kPairs]) {
    decode_by_words<MmaNf4Permute>(w, factors(a, t), out);
  }
};

// A chunk type's twin that decodes the same weights with its lookup in registers (void: none).
template <typename P>
struct RegisterTwin {
  using type = void;
};
template <uint32_t kChunkCols, bool kPrecomputed>
struct RegisterTwin<MmaNf4Scaled<kChunkCols, kPrecomputed>> {
  using type = MmaNf4Permute<kChunkCols, kPrecomputed>;
};

// kBitDecode: E4M3 placed on BF16 bits by integer operations (PRMT, shift, LOP3) and one
// exact BF16 multiply by 2^120, NaN codes caught per lane and row of a chunk; otherwise the
// hardware E4M3 -> F16 conversion and two conversions on to BF16 (sm_89 and newer; before
// sm_89 that path falls back to bit arithmetic in FP32).
template <bool kBitDecode>
struct MmaFp8 {
  static constexpr uint32_t kBits = 8;
  static constexpr uint32_t kChunk = 64;   // 16 columns (16 bytes) per lane
  static constexpr int kPairs = kChunk / 8;
  static constexpr bool kFactored = true;
  static constexpr bool kWordwise = false;
  static constexpr int kSplits = 1;
  static constexpr int kRuns = 1;
  static constexpr int kSplitEntries = 1;
  using Word = uint4;
  using Aux = float;
  using Raw = float;

  static __device__ void load_smem(const QuantView&, uint32_t*, float*) {}
  static __device__ __forceinline__ Aux finish(const QuantView&, const float*, Raw r) { return r; }
  // A lane row's scales, found once a stripe (run v51): the tensor and channel scale is the
  // row's for every chunk, so it is loaded once; block and group scales are the row's run of
  // scales, indexed by the chunk's column block. Before, each chunk rebuilt the index from
  // the row and column (a switch on the granularity, 64-bit products, for a stack of
  // matrices a 64-bit division by n) and loaded the scale again.
  struct Cursor {
    const void* run;  // the row's first block/group scale; null: `fixed` for every column
    float fixed;      // the tensor or channel scale; 0 for a padding row
  };
  static __device__ __forceinline__ Cursor cursor(const QuantView& v, uint64_t row, bool ok) {
    if (!ok) return {nullptr, 0.f};
    const uint64_t first = dev::Fp8::scale_index(v, row, 0);
    if (v.granularity <= 1) return {nullptr, dev::Fp8::scale_at(v, first)};
    return {static_cast<const uint8_t*>(v.scales) + first * dev::Fp8::scale_bytes(v.scale_type), 0.f};
  }
  static __device__ __forceinline__ Raw aux(const QuantView& v, const float*, const Cursor& r, bool cols_ok, uint64_t kc) {
    if (!cols_ok) return 0.f;
    if (r.run == nullptr) return r.fixed;
    const uint64_t col = v.granularity == 2 ? dev::div_by(kc, v.block_k, v.block_k_shift) : dev::div_by(kc, v.group_size, v.group_shift);
    return dev::Fp8::scale_from(v.scale_type, r.run, col);
  }
  static __device__ __forceinline__ void decode(Word w, Aux& scale, const uint32_t*, uint32_t (&a)[kSplits][kPairs]) {
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
    if constexpr (kBitDecode) {
      // e4m3 * 2^-120 on BF16 bits (kernels/e4m3_bits.h), then * 2^120, exact. The NaN codes
      // (0x7F, 0xFF) would decode as 480: any of them places a BF16 NaN in the lane's first
      // pair instead, so the mma makes the row's sum NaN for every batch column, as in the
      // reference. (Not a NaN scale: the lane's scale multiplies only the batch columns its C
      // fragment holds, while the row's codes are spread over the four lanes of its quad --
      // run v31 caught that at batch 9.)
      uint32_t nan = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t p = dev::prmt(ws[j / 2], 0u, j % 2 ? 0x3424u : 0x1404u);  // bytes 0, 1 or 2, 3 -> [0, b0, 0, b1]
        a[0][j] = dev::mul_bf16x2(e4m3_pair_to_bf16x2_scaled(p), kE4m3Bf16Rescale);
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) nan |= (ws[q] & 0x7F7F7F7Fu) + 0x01010101u;
      if (nan & 0x80808080u) a[0][0] = 0x7FC07FC0u;
    } else {
      // E4M3 -> F16 -> F32 -> BF16: every step exact, NaN stays NaN.
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float lo, hi;
        dev::e4m3x2_to_f32(j % 2 ? ws[j / 2] >> 16 : ws[j / 2], lo, hi);
        a[0][j] = dev::pack_bf16x2(lo, hi);
      }
    }
  }
};

// A measurement aid, never a product path (KernelVariants::gemv_probe): format P with its
// decode left out -- the code words go into the mma as they are, so the outputs are
// meaningless -- to time what the loop costs without the decode (loads of codes, scales and
// activations, the mma, addressing, the factored formats' scale FMAs). Runs v33 and v34
// measured it; the kernel tests never run it.
template <typename P>
struct SkipDecode : P {
  static constexpr bool kWordwise = false;  // its decode is the whole chunk's
  static __device__ __forceinline__ uint32_t bits_of(uint32_t e) { return e; }
  static __device__ __forceinline__ uint32_t bits_of(float e) { return __float_as_uint(e); }
  static __device__ __forceinline__ void decode(typename P::Word w, typename P::Aux& e, const uint32_t*,
                                                uint32_t (&a)[P::kSplits][P::kPairs]) {
    constexpr int kWords = sizeof(w) / 4;
    uint32_t ws[kWords];
    memcpy(ws, &w, sizeof w);
    ws[kWords - 1] ^= bits_of(e);  // the scale stays a dependency, as in the real decode
#pragma unroll
    for (int sp = 0; sp < P::kSplits; ++sp)
#pragma unroll
      for (int i = 0; i < P::kPairs; ++i) a[sp][i] = ws[i % kWords];
  }
};

// Measurement aids for NF4's BF16-table kernel (KernelVariants::gemv_probe 2 and 3, run v58):
// without its absmax inputs (no loads, absmax 1) or without its table fill (the lookups read
// whatever shared memory holds). Outputs meaningless; the kernel tests never run them.
template <typename P>
struct SkipAbsmax : P {
  static __device__ __forceinline__ typename P::Raw aux(const QuantView&, const float*, const typename P::Cursor&, bool, uint64_t) { return {}; }
  static __device__ __forceinline__ float finish(const QuantView&, const float*, const typename P::Raw&) { return 1.f; }
};
template <typename P>
struct SkipTableFill : P {
  static __device__ void load_smem(const QuantView& v, uint32_t*, float* nested) { MmaNf4<Nf4Table::kBf16Pairs>::load_nested(v, nested); }
};

template <typename W>
__device__ __forceinline__ W load_word(const uint8_t* p) {
  return __ldg(reinterpret_cast<const W*>(p));
}

// A lane's code bytes of one row of a chunk: its one run, or (kRuns 2) its two runs of 8 bytes,
// `run_bytes` apart.
template <typename P>
__device__ __forceinline__ typename P::Word load_codes(const uint8_t* p, uint32_t run_bytes) {
  if constexpr (P::kRuns == 1) {
    return load_word<typename P::Word>(p);
  } else {
    static_assert(P::kRuns == 2 && sizeof(typename P::Word) == 16, "two runs of 8 bytes");
    const uint2 a = load_word<uint2>(p), b = load_word<uint2>(p + run_bytes);
    return make_uint4(a.x, a.y, b.x, b.y);
  }
}

// 2 * kPairs activations from p (16-byte aligned) as bf16x2 pairs, 16 bytes a load.
template <int kPairs>
__device__ __forceinline__ void load_x_vector(const uint16_t* __restrict__ p, uint32_t* b) {
#pragma unroll
  for (int i = 0; i < kPairs; i += 4) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p + 2 * i));
    b[i] = q.x; b[i + 1] = q.y; b[i + 2] = q.z; b[i + 3] = q.w;
  }
}

// 2 * kPairs activations x[nb][kc ..] as bf16x2 pairs; zeros past K. Lanes whose batch row
// does not exist load the last row instead: their mma columns are never written out, and
// the whole warp takes one path (at batch 1, 28 of 32 lanes used to zero-fill; measured
// neutral in run v12, kept as the simpler code).
template <int kPairs>
__device__ __forceinline__ void load_x(const uint16_t* __restrict__ x, uint64_t k, bool vector_x, int nb, int batch, uint64_t kc,
                                       uint32_t* b) {
  nb = min(nb, batch - 1);
  if (kc >= k) {
#pragma unroll
    for (int i = 0; i < kPairs; ++i) b[i] = 0;
    return;
  }
  const uint16_t* p = x + uint64_t(nb) * k + kc;
  if (vector_x && kc + 2 * kPairs <= k) {
    load_x_vector<kPairs>(p, b);
    return;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const uint32_t lo = kc + 2 * i < k ? p[2 * i] : 0u, hi = kc + 2 * i + 1 < k ? p[2 * i + 1] : 0u;
    b[i] = lo | (hi << 16);
  }
}

// load_x for a lane whose columns [kc, kc + 2 * kPairs) all lie before K (a chunk below
// MmaGeometry::full_chunks): no zero fill and no per-column test. With those on the path of
// every chunk the compiler zeroed all 2 * kPairs registers ahead of each chunk's loads (run v50).
template <int kPairs>
__device__ __forceinline__ void load_x_in_k(const uint16_t* __restrict__ x, uint64_t k, bool vector_x, int nb, int batch, uint64_t kc,
                                            uint32_t* b) {
  nb = min(nb, batch - 1);
  const uint16_t* p = x + uint64_t(nb) * k + kc;
  if (vector_x) {
    load_x_vector<kPairs>(p, b);
    return;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) b[i] = uint32_t(p[2 * i]) | (uint32_t(p[2 * i + 1]) << 16);
}

// What P's decode looks its codes up in, formed once a stripe: the block's shared-memory
// table, or a format's own register-resident table (P::register_lookup: MmaNf4Permute).
template <typename P>
__device__ __forceinline__ auto lookup_of(const QuantView& v, const uint32_t* split) {
  if constexpr (requires { P::register_lookup(v); }) return P::register_lookup(v);
  else return split;
}

// The chunk type whose kernel's occupancy sets a launch's warp count (warps_per_stripe), and
// so the order of its sums: P itself, or for NF4's shared-memory-table kernel its register
// lookup twin (RegisterTwin) -- so that either lookup, in a dense or a grouped launch, gives
// the same bits, and the warps are not bounded by a table the twin does not have.
template <typename P>
struct WarpRuleOf {
  using type = std::conditional_t<std::is_void_v<typename RegisterTwin<P>::type>, P, typename RegisterTwin<P>::type>;
};
// NF4's probes (measurement aids) run at the warps of the kernel they take apart.
template <typename P>
struct WarpRuleOf<SkipAbsmax<P>> : WarpRuleOf<P> {};
template <typename P>
struct WarpRuleOf<SkipTableFill<P>> : WarpRuleOf<P> {};

// One chunk's codes and scale inputs of stripe rows g and g + 8 (lane-level).
template <typename P>
struct ChunkLoads {
  typename P::Word wg, wh;
  typename P::Raw rg, rh;
};

// The factored formats' mma steps over one scale block: decoded pairs [0, N) of rows g and h
// (every split) against the activation pairs [first, first + N), into partial sums that the
// rows' scales sg and sh then multiply into acc.
template <int kSplits, int N, int NT, int kPairs>
__device__ __forceinline__ void scaled_block_mma(const uint32_t (&a_g)[kSplits][N], const uint32_t (&a_h)[kSplits][N],
                                                 const uint32_t (&bx)[NT][kPairs], int first, float sg, float sh, float (&acc)[NT][4]) {
  float part[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.f;
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp)
#pragma unroll
    for (int q = 0; q < N / 2; ++q)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        mma16816(part[j], a_g[sp][2 * q], a_h[sp][2 * q], a_g[sp][2 * q + 1], a_h[sp][2 * q + 1], bx[j][first + 2 * q], bx[j][first + 2 * q + 1]);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    acc[j][0] = fmaf(sg, part[j][0], acc[j][0]);
    acc[j][1] = fmaf(sg, part[j][1], acc[j][1]);
    acc[j][2] = fmaf(sh, part[j][2], acc[j][2]);
    acc[j][3] = fmaf(sh, part[j][3], acc[j][3]);
  }
}

// Whether format P's stripe sums take a per-matrix tensor scale (MmaNvfp4::kTensorScale).
template <typename P>
constexpr bool tensor_scaled() {
  if constexpr (requires { P::kTensorScale; }) return P::kTensorScale;
  else return false;
}

// Whether format P has a warp-uniform one-factor step (MmaMxfp4::kUniformStep).
template <typename P>
constexpr bool uniform_step() {
  if constexpr (requires { P::kUniformStep; }) return P::kUniformStep;
  else return false;
}

template <typename P, bool kOne, typename F>
__device__ __forceinline__ void decode_row_word(uint32_t w, const F& f, uint32_t (&p)[4]) {
  if constexpr (kOne) P::decode_word_one(w, f, p);
  else P::decode_word(w, f, p);
}

// The step: a chunk's loaded codes decoded and multiplied into acc by the mma chain.
// mma step q: k slots {2t, 2t+1} <- lane columns 4q, 4q+1; {2t+8, 2t+9} <- 4q+2, 4q+3.
// kWordwise (a format with a word-by-word decode, MXFP4): each code word's pairs decoded just
// before the two mma steps that take them, instead of the chunk's 32 pairs first. Same mmas in
// the same order. Run v52: at unroll 1 that freed 16-21 registers (a fourth 8-warp block a
// SM) and made those kernels 5-16% faster; in the prefetch step (U = 0) it was slower, also
// with the next chunk's loads kept ahead of the chain (not profiled further), so that step
// keeps the whole-chunk decode.
// `split`: what P's decode looks its codes up in (lookup_of).
template <typename P, int NT, bool kWordwise, typename Lookup>
__device__ __forceinline__ void chunk_mma(const QuantView& v, const ChunkLoads<P>& l, const uint32_t (&bx)[NT][P::kPairs],
                                          const Lookup& split, const float* nested, float (&acc)[NT][4]) {
  constexpr int kPairs = P::kPairs;
  typename P::Aux ag = P::finish(v, nested, l.rg), ah = P::finish(v, nested, l.rh);
  if constexpr (kWordwise) {
    const auto fg = P::factors(ag, split), fh = P::factors(ah, split);
    constexpr int kWords = sizeof(typename P::Word) / 4;
    uint32_t wg[kWords], wh[kWords];
    memcpy(wg, &l.wg, sizeof wg);
    memcpy(wh, &l.wh, sizeof wh);
    // kOne: P's one-factor decode (P::kUniformStep), taken by the whole warp or not at all;
    // the same pairs as decode_word's wherever the warp takes it.
    auto words = [&](auto one) {
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        uint32_t pg[4], ph[4];
        decode_row_word<P, decltype(one)::value>(wg[i], fg, pg);
        decode_row_word<P, decltype(one)::value>(wh[i], fh, ph);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma16816(acc[j], pg[0], ph[0], pg[1], ph[1], bx[j][4 * i], bx[j][4 * i + 1]);
          mma16816(acc[j], pg[2], ph[2], pg[3], ph[3], bx[j][4 * i + 2], bx[j][4 * i + 3]);
        }
      }
    };
    if constexpr (uniform_step<P>()) {
      // Every lane of the warp runs the chunk loop together (its bounds depend on the warp
      // alone), so the vote sees all 32.
      if (__all_sync(0xffffffffu, P::one_factor(fg) && P::one_factor(fh))) words(std::true_type{});
      else words(std::false_type{});
    } else {
      words(std::false_type{});
    }
    return;
  }
  if constexpr (P::kRuns > 1) {
    // Run by run: a run's lookups issued together, then its mma steps into its own partial
    // set, scaled; half the decoded pairs live at a time.
    constexpr int kRunPairs = kPairs / P::kRuns;
#pragma unroll
    for (int r = 0; r < P::kRuns; ++r) {
      uint32_t a_g[P::kSplits][kRunPairs], a_h[P::kSplits][kRunPairs];
      P::template decode_pairs<kRunPairs>(l.wg, r * kRunPairs, split, a_g);
      P::template decode_pairs<kRunPairs>(l.wh, r * kRunPairs, split, a_h);
      scaled_block_mma(a_g, a_h, bx, r * kRunPairs, run_scale(ag, r), run_scale(ah, r), acc);
    }
    return;
  }
  uint32_t a_g[P::kSplits][kPairs], a_h[P::kSplits][kPairs];
  P::decode(l.wg, ag, split, a_g);
  P::decode(l.wh, ah, split, a_h);
  if constexpr (!P::kFactored) {
#pragma unroll
    for (int q = 0; q < kPairs / 2; ++q)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        mma16816(acc[j], a_g[0][2 * q], a_h[0][2 * q], a_g[0][2 * q + 1], a_h[0][2 * q + 1], bx[j][2 * q], bx[j][2 * q + 1]);
  } else {
    scaled_block_mma(a_g, a_h, bx, 0, run_scale(ag, 0), run_scale(ah, 0), acc);
  }
}

// Stripe `stripe` of v (matrix stripe / g.stripes, its stripe s = stripe % g.stripes) times
// `batch` activation rows, accumulated in this warp's C fragments. The block's warps (chosen
// at launch) share the stripe, warp w taking chunks w, w + warps, ..., always in that order,
// so every U gives the same sums bit for bit:
//  - U = 1, 2 (v3.2): all loads of U chunks (codes, scales, activations) are issued before
//    any is used, then the U chunks are decoded and multiplied;
//  - U = 0 (v45, the rolling prefetch): one chunk per step, with the codes and scale inputs of
//    the warp's next chunk already in flight while this one is decoded, so a warp's DRAM wait
//    overlaps its own decode and mma instead of adding to them; the activations (L1/L2 hits)
//    are loaded at the step that uses them, so that only the codes and scales are held in
//    registers across a step.
// The weights are the only memory read before dev::wait_for_producer() (a programmatic launch
// overlaps that with the previous kernel's end): the U = 0 step's first chunk is loaded first.
template <typename P, int NT, int U>
__device__ __forceinline__ void stripe_mma(const QuantView& v, const MmaGeometry& g, uint32_t stripe, const uint16_t* __restrict__ x,
                                           int batch, const uint32_t* split, const float* nested, float (&acc)[NT][4]) {
  constexpr int kPairs = P::kPairs;
  const auto lookup = lookup_of<P>(v, split);
  constexpr uint32_t kLaneCols = P::kChunk / 4;
  // A lane's columns of a chunk as P::kRuns runs: run r is [r kRunCols + ti kLaneRunCols, + kLaneRunCols).
  constexpr uint32_t kRunCols = P::kChunk / P::kRuns, kLaneRunCols = kRunCols / 4;
  constexpr int kRunPairs = kPairs / P::kRuns;
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gi = lane >> 2, ti = lane & 3;
  const uint32_t b_mat = stripe / g.stripes, s = stripe - b_mat * g.stripes;
  const uint64_t n_g = uint64_t(s) * 16 + gi, n_h = n_g + 8;
  const bool ok_g = n_g < v.n, ok_h = n_h < v.n;
  const uint64_t row_g = uint64_t(b_mat) * v.n + n_g, row_h = row_g + 8;
  const uint8_t* base = v.codes + uint64_t(stripe) * g.stripe_bytes + gi * g.tile_row_bytes + ti * (kLaneRunCols * P::kBits / 8);
  const uint32_t h_off = 8 * g.tile_row_bytes;
  const typename P::Cursor cur_g = P::cursor(v, row_g, ok_g), cur_h = P::cursor(v, row_h, ok_h);

#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // in_k: a std::bool_constant, true when chunk c is one of the full chunks (every column < K).
  auto load_chunk = [&](uint32_t c, ChunkLoads<P>& l, auto in_k) {
    const uint32_t tile = g.chunks_per_tile.div(c), sub = c - tile * g.chunks_per_tile.d;
    const uint8_t* p = base + tile * g.tile_bytes + sub * (P::kChunk * P::kBits / 8);
    l.wg = load_codes<P>(p, kRunCols * P::kBits / 8);
    l.wh = load_codes<P>(p + h_off, kRunCols * P::kBits / 8);
    const uint64_t kc = uint64_t(c) * P::kChunk + (P::kFactored ? 0 : kLaneCols * ti);
    const bool cols_ok = decltype(in_k)::value || kc < v.k;
    l.rg = P::aux(v, nested, cur_g, cols_ok, kc);
    l.rh = P::aux(v, nested, cur_h, cols_ok, kc);
  };
  auto load_x_of = [&](uint32_t c, uint32_t (&bx)[NT][kPairs], auto in_k) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < P::kRuns; ++r) {
        const uint64_t kc = uint64_t(c) * P::kChunk + r * kRunCols + kLaneRunCols * ti;
        if constexpr (decltype(in_k)::value) load_x_in_k<kRunPairs>(x, v.k, g.vector_x, gi + 8 * j, batch, kc, bx[j] + r * kRunPairs);
        else load_x<kRunPairs>(x, v.k, g.vector_x, gi + 8 * j, batch, kc, bx[j] + r * kRunPairs);
      }
  };
  constexpr std::true_type kInK{};
  constexpr std::false_type kMaybePastK{};

  if constexpr (U == 0) {
    ChunkLoads<P> next;
    if (uint32_t(warp) < g.chunks) load_chunk(warp, next, kMaybePastK);
    dev::wait_for_producer();
    if (!g.release_late) dev::release_dependents();
    // One chunk: its activations, the warp's next chunk put in flight, the mma chain. in_k: c
    // is a full chunk (no bound tests for it).
    auto step = [&](uint32_t c, auto in_k) {
      const ChunkLoads<P> cur = next;
      uint32_t bx[NT][kPairs];
      load_x_of(c, bx, in_k);
      const uint32_t n = c + warps;
      if (decltype(in_k)::value && n < g.full_chunks) load_chunk(n, next, kInK);
      else if (n < g.chunks) load_chunk(n, next, kMaybePastK);
      chunk_mma<P, NT, false>(v, cur, bx, lookup, nested, acc);
    };
    // The full chunks without bound tests, then the last (padded) ones: the same chunks in the
    // same order, so the same sums bit for bit.
    uint32_t c = warp;
    for (; c < g.full_chunks; c += warps) step(c, kInK);
    for (; c < g.chunks; c += warps) step(c, kMaybePastK);
  } else {
    dev::wait_for_producer();
    if (!g.release_late) dev::release_dependents();
    for (uint32_t c0 = warp; c0 < g.chunks; c0 += warps * U) {
      ChunkLoads<P> l[U];
      uint32_t bx[U][NT][kPairs];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint32_t c = c0 + u * warps;
        if (c >= g.chunks) break;
        load_chunk(c, l[u], kMaybePastK);
        load_x_of(c, bx[u], kMaybePastK);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint32_t c = c0 + u * warps;
        if (c >= g.chunks) break;
        chunk_mma<P, NT, P::kWordwise>(v, l[u], bx[u], lookup, nested, acc);
      }
    }
  }
  if constexpr (tensor_scaled<P>()) {
    bool divides;
    const float t = P::tensor_factor(v, b_mat, divides);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float a = __fmul_rn(acc[j][q], 65536.0f);  // the decode's 2^-16 back (a power of two: exact)
        acc[j][q] = divides ? __fdiv_rn(a, t) : __fmul_rn(a, t);
      }
  }
}

// Sums the block's warps' C fragments (in warp order) and has warp 0 store them: output
// (batch row nb, stripe row r) goes to y[nb * batch_stride + out_row0 + r] for the stripe's
// rows r < rows_left. C fragment: c0, c1 = (row g, batch 2t, 2t+1), c2, c3 = (row g + 8,
// same batch rows), plus 8 batch rows per n-tile.
template <int NT, bool OutF32>
__device__ __forceinline__ void reduce_store(float (*partial)[NT][32][4], const float (&acc)[NT][4], int batch, uint64_t rows_left,
                                             void* y, uint64_t out_row0, uint64_t batch_stride) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gi = lane >> 2, ti = lane & 3;
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
      for (int w = 1; w < warps; ++w) sum += partial[w][j][lane][q];
      const int nb = 8 * j + 2 * ti + (q & 1);
      const uint32_t r = gi + (q >= 2 ? 8 : 0);
      if (nb >= batch || r >= rows_left) continue;
      dev::store_output<OutF32>(y, uint64_t(nb) * batch_stride + out_row0 + r, sum);
    }
}

// reduce_store for the expert launch with gpt-oss's activation (ExpertGemvArgs::swiglu), batch 1:
// the same sums in the same order, then lane 4g (ti 0) holds rows g (c0) and g + 8 (c2) of the
// stripe, and the up row g + 1 of each gate row g (even) is in lane 4g + 4. Output j of the pair
// is the activation of its rows 2j and 2j + 1 (n even, so a stripe holds whole pairs).
__device__ __forceinline__ void reduce_store_swiglu(float (*partial)[1][32][4], const float (&acc)[1][4], uint64_t rows_left,
                                                    const ExpertGemvArgs& a, uint64_t pair, uint32_t s, const uint16_t* bias) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gi = lane >> 2, ti = lane & 3;
#pragma unroll
  for (int q = 0; q < 4; ++q) partial[warp][0][lane][q] = acc[0][q];
  __syncthreads();
  if (warp != 0) return;
  float sum[2], up[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] = partial[0][0][lane][2 * h];
    for (int w = 1; w < warps; ++w) sum[h] += partial[w][0][lane][2 * h];
    up[h] = __shfl_down_sync(0xffffffffu, sum[h], 4);
  }
  if (ti != 0 || (gi & 1)) return;
  uint16_t* y = static_cast<uint16_t*>(a.y);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t r = gi + 8 * h;
    if (r >= rows_left) continue;
    const uint64_t row = uint64_t(s) * 16 + r;
    y[pair * (a.n / 2) + row / 2] = clamped_swiglu(sum[h], up[h], a.swiglu_bias != nullptr, bf16_to_f32(bias[r]), bf16_to_f32(bias[r + 1]),
                                                   a.swiglu_alpha, a.swiglu_limit);
  }
}

// reduce_store for the expert launch with a gated MLP's activation (ExpertGemvArgs::gated),
// batch 1: the same sums in the same order as reduce_store (lane 4g holds rows g and g + 8 of
// the stripe), rounded to BF16 as it stores them. Pairs 2j (gate) and 2j + 1 (up) are two
// blocks of the launch, which meet in one exchange word an output element: each swaps in its
// BF16 value with bit 16 set, and the one that finds the other's value there (the later one)
// writes silu_mul(gate, up) to gated_out and sets the word back to zero for the next launch.
// The value travels in the atomic itself, so no fence is needed: the activation costs the later
// block of a pair one L2 round trip, not a launch of its own between this GEMV and the next
// (run v66: a counter, two fences and a load of the other's outputs cost as much as a launch).
__device__ __forceinline__ void reduce_store_gated(float (*partial)[1][32][4], const float (&acc)[1][4], uint64_t rows_left,
                                                   const ExpertGemvArgs& a, uint64_t pair, uint32_t s) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gi = lane >> 2, ti = lane & 3;
#pragma unroll
  for (int q = 0; q < 4; ++q) partial[warp][0][lane][q] = acc[0][q];
  __syncthreads();
  if (warp != 0 || ti != 0) return;
  const uint64_t first = (pair / 2) * a.n + uint64_t(s) * 16;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = partial[0][0][lane][2 * h];
    for (int w = 1; w < warps; ++w) sum += partial[w][0][lane][2 * h];
    const uint32_t r = gi + 8 * h;
    if (r >= rows_left) continue;
    const uint32_t mine = iris::f32_to_bf16(sum);
    uint32_t* word = a.gated_exchange + first + r;
    const uint32_t theirs = atomicExch(word, kGatedPresent | mine);
    if (!(theirs & kGatedPresent)) continue;  // the other block of the pair finishes this element
    const uint32_t gate = pair & 1 ? theirs & 0xffffu : mine, up = pair & 1 ? mine : theirs & 0xffffu;
    a.gated_out[first + r] = silu_mul(bf16_to_f32(uint16_t(gate)), bf16_to_f32(uint16_t(up)));
    *word = 0;
  }
}

template <typename P, int NT, bool OutF32, int U>
__global__ void __launch_bounds__(threads_bound(U)) gemv_mma_kernel(const QuantView v, const MmaGeometry g, const uint16_t* __restrict__ x,
                                                                    int batch, void* y) {
#if IRIS_ARCH_BF16_MMA  // else a stub: never launched there (see mma16816), and fast to compile
  __shared__ __align__(16) uint32_t split[P::kSplitEntries];
  __shared__ float nested[256];
  extern __shared__ __align__(16) unsigned char dynamic_smem[];  // partial_bytes<NT>(warps), then the spread's unused bytes
  auto partial = reinterpret_cast<float (*)[NT][32][4]>(dynamic_smem);
  const uint32_t stripe = blockIdx.x;
  if (threadIdx.x == 0) dev::prefetch_l2(v.codes + uint64_t(stripe) * g.stripe_bytes, g.l2_prefetch);
  P::load_smem(v, split, nested);
  __syncthreads();
  float acc[NT][4];
  stripe_mma<P, NT, U>(v, g, stripe, x, batch, split, nested, acc);
  if (g.release_late) dev::release_dependents();
  const uint32_t b_mat = stripe / g.stripes, s = stripe - b_mat * g.stripes;
  reduce_store<NT, OutF32>(partial, acc, batch, v.n - uint64_t(s) * 16, y, uint64_t(b_mat) * v.n + uint64_t(s) * 16, v.rows);
#else
  __trap();
#endif
}

// The minimum blocks a SM that the gated instance of P is compiled for (P::kGatedMinBlocks), 0
// (no bound) for formats that name none.
template <typename P>
constexpr int gated_min_blocks() {
  if constexpr (requires { P::kGatedMinBlocks; }) return P::kGatedMinBlocks;
  else return 0;
}

// The grouped expert GEMV on the tensor cores (batch 1 per pair): block = (pair, stripe of
// its expert), the same body and warp count as cuda_gemv_mma on that expert's matrix alone,
// so each output equals iris_cuda_gemv_matrix's bit for bit.
// The prefetch step (U = 0) is held to 3 blocks of 8 warps a SM (80 registers): unbounded it
// took 103-110 and lost a block a SM, which cost more than the prefetch gained (run v45). A
// minimum of 0 leaves the other steps as unbounded (1 would not: ptxas then took 95 registers
// for MXFP4 at U = 1, 20% slower, run v45c).
// kSwiglu: gpt-oss's activation in the store (ExpertGemvArgs::swiglu; BF16 output, unroll 1):
// its own instances, so that the plain kernels keep their code and registers (as a runtime flag
// it changed them, e.g. NF4's split table 64 -> 76 registers, a block a SM fewer). Run v56: its
// launch measured no faster than the plain one plus Inductor's activation kernel after it.
// kGated: a gated MLP's activation in the store (ExpertGemvArgs::gated; BF16, unroll 1), its own
// instances for the same reason, bounded to gated_min_blocks<P>() blocks a SM.
template <typename P, bool OutF32, int U, bool kSwiglu = false, bool kGated = false>
__global__ void __launch_bounds__(threads_bound(U), U == 0 ? 3 : (kGated ? gated_min_blocks<P>() : 0)) experts_mma_kernel(const ExpertGemvArgs a, const MmaGeometry g) {
#if IRIS_ARCH_BF16_MMA  // else a stub, as gemv_mma_kernel's
  __shared__ __align__(16) uint32_t split[P::kSplitEntries];
  __shared__ float nested[256];
  extern __shared__ __align__(16) unsigned char dynamic_smem[];  // as gemv_mma_kernel's
  auto partial = reinterpret_cast<float (*)[1][32][4]>(dynamic_smem);
  // The router's picks come from the kernel before: nothing is read before they are written.
  dev::wait_for_producer();
  if (!g.release_late) dev::release_dependents();
  const uint32_t pair = blockIdx.x / g.stripes, s = blockIdx.x - pair * g.stripes;
  const uint64_t rows_left = a.n - uint64_t(s) * 16;
  const int32_t e = a.expert_ids[pair];
  const int64_t xr = a.x_rows ? a.x_rows[pair] : int64_t(pair);
  if (e < 0 || uint32_t(e) >= a.n_experts || xr < 0 || uint64_t(xr) >= a.x_count) {  // uniform over the block
    // A bad router index must show, never read another tensor's memory: NaN outputs.
    if constexpr (kGated) {  // through the pair's exchange, which the other block counts on
      const float nan = __uint_as_float(0x7fc00000u);
      const float nan_acc[1][4] = {{nan, nan, nan, nan}};
      reduce_store_gated(partial, nan_acc, rows_left, a, pair, s);
    } else if (kSwiglu) {
      if (threadIdx.x < 8 && 2 * threadIdx.x < rows_left) static_cast<uint16_t*>(a.y)[pair * (a.n / 2) + uint64_t(s) * 8 + threadIdx.x] = 0x7fc0;
    } else if (threadIdx.x < 16 && threadIdx.x < rows_left) {
      dev::store_output<OutF32>(a.y, pair * a.n + uint64_t(s) * 16 + threadIdx.x, __uint_as_float(0x7fc00000u));
    }
    return;
  }
  const ExpertMatrix& m = a.experts[e];
  const QuantView v = m.view;
  if (threadIdx.x == 0) dev::prefetch_l2(v.codes + (uint64_t(m.matrix) * g.stripes + s) * g.stripe_bytes, g.l2_prefetch);
  // The activation's bias elements of the stripe's rows, into shared memory before the sums:
  // read after them they add a memory round trip to each block's tail (and the MXFP4 instance
  // took 55 registers to the plain kernel's 63), held in registers across the loop 58. Run v56b (H100, top-4 of 32,
  // the activation's launch over the plain one): read at the end +1.9 us at MXFP4
  // 32x5760x2880 and +2.1 at 32x2880x2880; from shared memory +1.8 and +1.4.
  __shared__ uint16_t bias[16];
  if (kSwiglu && threadIdx.x < 16) bias[threadIdx.x] = a.swiglu_bias && threadIdx.x < rows_left ? a.swiglu_bias[uint64_t(e) * a.n + uint64_t(s) * 16 + threadIdx.x] : 0;
  P::load_smem(v, split, nested);
  __syncthreads();
  float acc[1][4];
  stripe_mma<P, 1, U>(v, g, uint32_t(m.matrix) * g.stripes + s, a.x + uint64_t(xr) * a.k, 1, split, nested, acc);
  if (g.release_late) dev::release_dependents();
  if constexpr (kSwiglu) reduce_store_swiglu(partial, acc, rows_left, a, pair, s, bias);
  else if constexpr (kGated) reduce_store_gated(partial, acc, rows_left, a, pair, s);
  else reduce_store<1, OutF32>(partial, acc, 1, rows_left, a.y, pair * a.n + uint64_t(s) * 16, 0);
#else
  __trap();
#endif
}

// A CUDA query's result as a yes/no for the launch aids that fall back quietly (spread_smem,
// table_binds): a failure leaves no error behind for the launch's own check.
inline bool query_ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

// Warps per stripe: as many as keep every stripe's block resident at once (one wave: a
// second, partial wave costs a whole block time, run v7), at most 8, at least 1. Where no
// count gives one wave, the fewest waves, and of those the most warps: a kernel whose shared
// memory bounds its blocks a SM (NF4's BF16 pair table, 37 KB) has as many waves at 8 warps as
// at 1 (run v54, H200: 27.7 us at 8 warps against 132 at 1, NF4 14336x4096).
// bytes_per_warp: the dynamic shared memory a warp of the launch takes (partial_bytes).
// `forced`: a count given before the rule (preset_warps: the variant, or gemv_wide_warps).
template <typename K>
Result<int> warps_per_stripe(K kernel, uint64_t stripes, const LaunchConfig& c, int forced, uint32_t bytes_per_warp) {
  if (forced) {
    if (forced < 1 || forced > kMaxWarps) return invalid_argument("gemv: " + std::to_string(forced) + " warps a stripe (1.." + std::to_string(kMaxWarps) + ")");
    return forced;
  }
  int best = 1;
  uint64_t best_waves = ~uint64_t(0);
  for (int w = kAutoMaxWarps; w >= 1; --w) {
    int per_sm = 0;
    IRIS_CUDA_TRY(blocks_per_sm(c.cache.get(), reinterpret_cast<const void*>(kernel), w * 32, size_t(w) * bytes_per_warp, &per_sm));
    const uint64_t per_wave = std::max<uint64_t>(1, uint64_t(per_sm) * c.sm_count);
    const uint64_t waves = (stripes + per_wave - 1) / per_wave;
    if (waves <= 1) return w;
    if (waves < best_waves) best = w, best_waves = waves;
  }
  return best;
}

// Launches of more warps than kAutoMaxWarps (forced) may take more than the 48 KB of shared
// memory a kernel gets without asking (NF4's pair table and 16 warps' sums at batch 9 and up),
// and so may a spread (spread_smem): the kernel's allowance is raised once to the most the device
// allows, never lowered -- a process-wide attribute, which a launch of fewer bytes on another
// thread must not shrink under this one.
template <typename K>
Status allow_dynamic_smem(K kernel, uint32_t dynamic, const LaunchConfig& c) {
  if (dynamic <= partial_bytes<2>(kAutoMaxWarps)) return Status::ok();  // within 48 KB with any kernel's static memory
  cudaFuncAttributes attributes{};
  const void* k = reinterpret_cast<const void*>(kernel);
  IRIS_CUDA_TRY(kernel_attributes(c.cache.get(), k, &attributes));
  if (dynamic <= uint32_t(attributes.maxDynamicSharedSizeBytes)) return Status::ok();
  // Unknown device limit: ask for what the launch needs and let the driver judge.
  const int most = c.smem_optin_per_block > 0 ? c.smem_optin_per_block - int(attributes.sharedSizeBytes) : int(dynamic);
  if (int64_t(dynamic) > most) return unsupported("gemv: " + std::to_string(dynamic) + " bytes of shared memory a block, more than the device has");
  IRIS_CUDA_TRY(raise_dynamic_smem(c.cache.get(), k, most));
  return Status::ok();
}

// The dynamic shared memory of a launch of `blocks` blocks of `threads` whose kernel uses
// `used` bytes of it (partial_bytes): `used`, or more, unused, to hold the launch to at most
// ceil(blocks / SMs) <= 2 blocks a SM where the kernel could hold more (gemv_spread; `used`
// otherwise, and wherever no byte count gives exactly that cap). The
// block scheduler is free to stack as many blocks on one SM as fit while others get fewer, and
// a one-wave GEMV takes as long as its fullest SM: run v60 measured MXFP4 4096x14336 at 16.1 us
// with 2 blocks a SM possible and 19.7 with 3 (H200). Only the residency changes, not the sums.
template <typename K>
uint32_t spread_smem(K kernel, int threads, uint64_t blocks, uint32_t used, const LaunchConfig& c) {
  if ((!gemv_spread(c.variants) && c.variants.gemv_blocks <= 0) || c.sm_count <= 0 || c.smem_per_sm <= 0 || blocks == 0) return used;
  // A placement aid, never a reason to fail the GEMV: any query that fails means no spread.
  int per_sm = 0;
  const void* k = reinterpret_cast<const void*>(kernel);
  if (!query_ok(blocks_per_sm(c.cache.get(), k, threads, used, &per_sm))) return used;
  // Only where each SM gets one or two blocks: the unused shared memory also takes L1's share of
  // the SM, which FP8 14336x4096 (held from 8 blocks a SM to 7) paid for, 22.7 -> 24.7 us, while
  // the most a scheduler can overfill an SM by falls with the blocks it gets (run v60).
  // A forced cap (KernelVariants::gemv_blocks) holds any launch to that many.
  const uint64_t forced = uint64_t(c.variants.gemv_blocks > 0 ? c.variants.gemv_blocks : 0);
  const uint64_t cap = forced ? forced : (blocks + uint64_t(c.sm_count) - 1) / uint64_t(c.sm_count);
  if ((!forced && cap > 2) || cap >= uint64_t(per_sm)) return used;
  cudaFuncAttributes attributes{};
  if (!query_ok(kernel_attributes(c.cache.get(), k, &attributes))) return used;
  // The smallest footprint a block at which cap + 1 blocks no longer fit an SM's shared memory.
  const uint64_t footprint = uint64_t(c.smem_per_sm) / (cap + 1) + 1;
  const uint64_t fixed = uint64_t(c.smem_reserved_per_block) + attributes.sharedSizeBytes;
  if (footprint <= fixed) return used;
  const uint64_t dynamic = std::max<uint64_t>(used, (footprint - fixed + 127) & ~uint64_t(127));
  const uint64_t most = uint64_t(c.smem_optin_per_block) - attributes.sharedSizeBytes;
  if (dynamic > most) return used;
  if (!allow_dynamic_smem(kernel, uint32_t(dynamic), c).is_ok()) {
    (void)cudaGetLastError();  // no spread, and no error left behind
    return used;
  }
  int spread = 0;
  if (!query_ok(blocks_per_sm(c.cache.get(), k, threads, size_t(dynamic), &spread))) return used;
  return uint64_t(spread) == cap ? uint32_t(dynamic) : used;
}

// The warps a launch of `stripes` stripes of format f at batches up to `batch` is given
// before the occupancy rule: forced (KernelVariants::gemv_warps) or gemv_wide_warps's; 0: none.
inline int preset_warps(const LaunchConfig& c, ViewFormat f, int batch, uint64_t stripes) {
  return c.variants.gemv_warps ? c.variants.gemv_warps : gemv_wide_warps(c, f, batch, stripes);
}

// The warp count of every launch over stripes of this geometry: decided by the F32-output
// dense kernel's occupancy and the stripes of one matrix call, so that the BF16 output is
// the F32 one rounded, and an expert's row from the grouped launch equals cuda_gemv_mma on
// that matrix alone (the warp count sets the order of the sums).
template <typename P, int NT, int U>
Result<int> stripe_warps(uint64_t stripes, ViewFormat format, const LaunchConfig& c) {
  using R = typename WarpRuleOf<P>::type;
  return warps_per_stripe(gemv_mma_kernel<R, NT, true, U>, stripes, c, preset_warps(c, format, NT * 8, stripes), partial_bytes<NT>(1));
}

// Whether `kernel`'s shared memory holds it to fewer blocks a SM than `twin` gets at `threads`
// and `dynamic` bytes: NF4's shared-memory table against its register lookup
// (nf4_register_lookup). Only the table's bound counts -- where registers bound `kernel`
// (the prefetch step, 122 registers) the twin's being smaller is no reason to swap (run v62:
// 4096x14336 19.1 us with the table against 22.8 in registers). False where a query fails,
// leaving no error behind.
template <typename K1, typename K2>
bool table_binds(K1 kernel, K2 twin, int threads, uint32_t dynamic, const LaunchConfig& c) {
  if (c.smem_per_sm <= 0) return false;
  int mine = 0, theirs = 0;
  cudaFuncAttributes attributes{};
  const void* k = reinterpret_cast<const void*>(kernel);
  if (!query_ok(blocks_per_sm(c.cache.get(), k, threads, dynamic, &mine)) ||
      !query_ok(blocks_per_sm(c.cache.get(), reinterpret_cast<const void*>(twin), threads, dynamic, &theirs)) || theirs <= mine ||
      !query_ok(kernel_attributes(c.cache.get(), k, &attributes)))
    return false;
  // Shared memory binds where one block more would not fit it.
  const uint64_t footprint = uint64_t(attributes.sharedSizeBytes) + dynamic + uint64_t(c.smem_reserved_per_block);
  return uint64_t(mine + 1) * footprint > uint64_t(c.smem_per_sm);
}

// The step a launch of `warps` warps runs: `step`, or unroll 1 where the prefetch step's
// register bound does not allow that many (the same sums: steps differ only in when a warp
// loads its chunks).
inline int step_for_warps(int step, int warps) { return step == 0 && warps > kPrefetchMaxWarps ? 1 : step; }

// Calls f(std::integral_constant<int, U>) for the step mode U (gemv_step): 0, 1 or 2.
template <typename F>
auto with_step(int step, F&& f) {
  switch (step) {
    case 0: return f(std::integral_constant<int, 0>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 1>{});
  }
}

// Calls f(std::type_identity<P>) for the NF4 chunk type P that runs view v under c: the declared
// BF16 table in bitsandbytes' arithmetic (MmaNf4Scaled: 128 columns where tile_k allows, reading
// the precomputed absmax where the view has it), or with the absmax on the partial sums where
// nf4_scaled_weights is off (128 columns where nf4_wide_chunks asks); else the exact table's
// lookup (nf4_pair_table). The dense and the grouped expert launch take the same P for the same
// c and geometry (the chunk width sets the order of the sums).
template <bool kPrecomputed, typename F>
auto with_nf4_scaled(const QuantView& v, F&& f) {
  if (v.tile_k % 128 == 0) return f(std::type_identity<MmaNf4Scaled<128, kPrecomputed>>{});
  return f(std::type_identity<MmaNf4Scaled<64, kPrecomputed>>{});
}

// (MmaNf4Scaled's launches take its register-lookup twin where nf4_register_lookup says: the
// same sums.)
template <typename F>
auto with_nf4(const LaunchConfig& c, const QuantView& v, F&& f) {
  using Wide = MmaNf4<Nf4Table::kBf16Pairs, true>;
  if (c.nf4_bf16_table && nf4_scaled_weights(c))
    return v.absmax_bf16 ? with_nf4_scaled<true>(v, f) : with_nf4_scaled<false>(v, f);
  if (c.nf4_bf16_table && v.tile_k % Wide::kChunk == 0 && nf4_wide_chunks(c)) return f(std::type_identity<Wide>{});
  if (c.nf4_bf16_table) return f(std::type_identity<MmaNf4<Nf4Table::kBf16Pairs>>{});
  if (nf4_pair_table(c)) return f(std::type_identity<MmaNf4<Nf4Table::kSplitPairs>>{});
  return f(std::type_identity<MmaNf4<Nf4Table::kSplit>>{});
}

// Calls f(std::type_identity<P>) with the chunk decoder that view v runs under c: MXFP4's, NF4's
// (with_nf4) or FP8's (by fp8_bit_decode). The one format dispatch of the dense launch, the
// grouped launch and the gated query, so that the query answers for the kernel that runs.
template <typename F>
Status with_format(const LaunchConfig& c, const QuantView& v, F&& f) {
  switch (v.format) {
    case ViewFormat::kMxfp4: return f(std::type_identity<MmaMxfp4>{});
    case ViewFormat::kNf4: return with_nf4(c, v, f);
    case ViewFormat::kFp8: return fp8_bit_decode(c) ? f(std::type_identity<MmaFp8<true>>{}) : f(std::type_identity<MmaFp8<false>>{});
    case ViewFormat::kNvfp4: return f(std::type_identity<MmaNvfp4>{});
    case ViewFormat::kIntGroup: break;
  }
  return unsupported("gemv: unknown format");
}

// Whether a launch of `warps` warps takes the register-lookup twin of the kernel it would run
// (nf4_register_lookup): where a variant asks, or where the table binds (table_binds, asked
// only then). The twin runs at the same warps, so the same sums.
template <typename K1, typename K2>
bool takes_register_twin(K1 kernel, K2 twin, int warps, uint32_t used, const LaunchConfig& c) {
  return nf4_register_lookup(c, c.variants.nf4_lookup == 0 && table_binds(kernel, twin, warps * 32, used, c));
}

// Launches `kernel` over `blocks` blocks of `warps` warps whose closing sums take `used` bytes
// of dynamic shared memory: with the spread's unused bytes (spread_smem), the allowance raised
// where the launch passes it (allow_dynamic_smem), as a programmatic dependent where it may be.
template <typename... Params, typename... Args>
Status launch_sized(void (*kernel)(Params...), unsigned blocks, int warps, uint32_t used, cudaStream_t s, const LaunchConfig& c, Args&&... args) {
  const uint32_t smem = spread_smem(kernel, warps * 32, blocks, used, c);
  IRIS_TRY(allow_dynamic_smem(kernel, smem, c));
  IRIS_CUDA_TRY(launch_kernel_smem(kernel, dim3(blocks), dim3(warps * 32), smem, s, programmatic_launch(c.variants, c.kernel_arch),
                                   std::forward<Args>(args)...));
  return Status::ok();
}

// The dense launch of P at the warps launch_k chose.
template <typename P, int NT, bool OutF32, int U>
Status launch_at(const QuantView& v, MmaGeometry g, const uint16_t* x, int batch, void* y, cudaStream_t s, const LaunchConfig& c, int warps) {
  if (warps * 32 > threads_bound(U)) return internal_error("gemv: the prefetch step launched with more than its warps");
  const uint64_t stripes = (v.rows / v.n) * g.stripes;
  g.l2_prefetch = l2_prefetch_bytes(c.variants, c.kernel_arch, g.stripe_bytes, stripes);
  g.release_late = c.variants.programmatic == 3;
  return launch_sized(gemv_mma_kernel<P, NT, OutF32, U>, unsigned(stripes), warps, partial_bytes<NT>(warps), s, c, v, g, x, batch, y);
}

template <typename P, int NT, bool OutF32, int U>
Status launch_k(const QuantView& v, MmaGeometry g, const uint16_t* x, int batch, void* y, cudaStream_t s, const LaunchConfig& c) {
  const uint64_t stripes = (v.rows / v.n) * g.stripes;
  IRIS_ASSIGN_OR_RETURN(int warps, (stripe_warps<P, NT, U>(stripes, v.format, c)));
  using Twin = typename RegisterTwin<P>::type;
  if constexpr (!std::is_void_v<Twin>) {
    if (takes_register_twin(gemv_mma_kernel<P, NT, OutF32, U>, gemv_mma_kernel<Twin, NT, OutF32, U>, warps, partial_bytes<NT>(warps), c))
      return launch_at<Twin, NT, OutF32, U>(v, g, x, batch, y, s, c, warps);
  }
  return launch_at<P, NT, OutF32, U>(v, g, x, batch, y, s, c, warps);
}

template <typename P, int NT, bool OutF32>
Status launch_u(const QuantView& v, const MmaGeometry& g, const uint16_t* x, int batch, void* y, cudaStream_t s, const LaunchConfig& c) {
  const uint64_t stripes = (v.rows / v.n) * g.stripes;
  const int step = step_for_warps(gemv_step(c, v.format, NT * 8, stripes), preset_warps(c, v.format, NT * 8, stripes));
  return with_step(step, [&](auto u) { return launch_k<P, NT, OutF32, decltype(u)::value>(v, g, x, batch, y, s, c); });
}

template <typename P>
MmaGeometry geometry_of(const QuantView& v, bool vector_x) {
  MmaGeometry g;
  g.chunks_per_tile = FastDiv(uint32_t(v.tile_k / P::kChunk));
  g.chunks = uint32_t(v.padded_k / P::kChunk);
  g.full_chunks = uint32_t(std::min<uint64_t>(v.k / P::kChunk, g.chunks));
  g.stripes = uint32_t(v.padded_n / 16);
  g.tile_row_bytes = uint32_t(v.tile_k * P::kBits / 8);
  g.tile_bytes = 16 * g.tile_row_bytes;
  g.stripe_bytes = 16 * v.padded_k * P::kBits / 8;
  g.vector_x = vector_x;
  g.l2_prefetch = 0;
  g.release_late = false;
  return g;
}

template <typename P>
Status launch_p(const QuantView& v, const uint16_t* x, int batch, void* y, bool f32, cudaStream_t s, const LaunchConfig& c) {
  const MmaGeometry g = geometry_of<P>(v, v.k % 8 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0);
  if (batch <= 8) return f32 ? launch_u<P, 1, true>(v, g, x, batch, y, s, c) : launch_u<P, 1, false>(v, g, x, batch, y, s, c);
  return f32 ? launch_u<P, 2, true>(v, g, x, batch, y, s, c) : launch_u<P, 2, false>(v, g, x, batch, y, s, c);
}

// launch_p for the probe, BF16 output only: the probe's F32 kernels would be compiled for nothing.
template <typename P>
Status launch_probe(const QuantView& v, const uint16_t* x, int batch, void* y, cudaStream_t s, const LaunchConfig& c) {
  const MmaGeometry g = geometry_of<P>(v, v.k % 8 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0);
  return batch <= 8 ? launch_u<P, 1, false>(v, g, x, batch, y, s, c) : launch_u<P, 2, false>(v, g, x, batch, y, s, c);
}

// Whether the gated activation's store would cost the launch of P at `warps` blocks a SM: its
// code raises some instances' registers (run v66: NF4's BF16 table with its absmax precomputed,
// 64 -> 82, and Llama-3-8B NF4 2.977 -> 3.131 ms/token on an H200). A failed occupancy query
// answers no.
template <typename P, bool kF32, int U>
bool gated_store_costs_blocks(const LaunchConfig& c, int warps) {
  int with = 0, without = 0;
  const int threads = warps * 32;
  return query_ok(blocks_per_sm(c.cache.get(), reinterpret_cast<const void*>(experts_mma_kernel<P, kF32, U, false, true>), threads,
                                partial_bytes<1>(warps), &with)) &&
         query_ok(blocks_per_sm(c.cache.get(), reinterpret_cast<const void*>(experts_mma_kernel<P, kF32, U, false, false>), threads,
                                partial_bytes<1>(warps), &without)) &&
         with < without;
}

// The grouped expert launch of P at the warps with_experts_family chose.
template <typename P, bool kF32, int U, bool kSwiglu, bool kGated>
Status launch_experts_at(const ExpertGemvArgs& a, MmaGeometry g, cudaStream_t s, const LaunchConfig& c, int warps) {
  if (warps * 32 > threads_bound(U)) return internal_error("expert gemv: the prefetch step launched with more than its warps");
  const unsigned blocks = unsigned(a.pairs * g.stripes);
  g.l2_prefetch = l2_prefetch_bytes(c.variants, c.kernel_arch, g.stripe_bytes, blocks);
  g.release_late = c.variants.programmatic == 3;
  if constexpr (kGated) {
    // The activation in the store only where it costs the launch no blocks a SM; elsewhere the
    // plain launch into the exchange, then the activation's own launch: the same bits
    // (cuda_experts_gated_in_launch tells callers which, so that they can launch the
    // activation themselves instead).
    if (gated_store_costs_blocks<P, kF32, U>(c, warps)) {
      ExpertGemvArgs plain = a;
      plain.gated = false, plain.y = a.gated_exchange;
      IRIS_TRY(launch_sized(experts_mma_kernel<P, kF32, U, false, false>, blocks, warps, partial_bytes<1>(warps), s, c, plain, g));
      return cuda_gated_from_exchange(a, s);
    }
  }
  return launch_sized(experts_mma_kernel<P, kF32, U, kSwiglu, kGated>, blocks, warps, partial_bytes<1>(warps), s, c, a, g);
}

// Calls f(std::type_identity<Family>, geometry, warps) with the kernel family (P, or NF4's
// register twin) and the warps of the grouped launch of P.
template <typename P, bool kF32, int U, bool kSwiglu, typename F>
Status with_experts_family(const QuantView& geometry, const LaunchConfig& c, F&& f) {
  // x is 16-byte aligned (checked by the caller), so every row of it is when K % 8 == 0.
  const MmaGeometry g = geometry_of<P>(geometry, geometry.k % 8 == 0);
  // The warp count of the dense launch on one matrix (its step's kernel sets the occupancy),
  // whatever this launch's step: warps set the order of the sums, and each pair's row must
  // equal that launch's bit for bit. (The step does not: a warp takes its chunks in the same
  // order at every step.)
  const int dense_step = step_for_warps(gemv_step(c, geometry.format, 8, g.stripes), preset_warps(c, geometry.format, 8, g.stripes));
  IRIS_ASSIGN_OR_RETURN(int warps,
                        with_step(dense_step, [&](auto u) { return stripe_warps<P, 1, decltype(u)::value>(g.stripes, geometry.format, c); }));
  using Twin = typename RegisterTwin<P>::type;
  if constexpr (!std::is_void_v<Twin>) {
    // The family (NF4's shared-memory table or its register twin) as the plain launch picks it:
    // the activation's store may raise one family's registers and not the other's (run v66), and
    // picked on the gated instances NF4 took the slower family at the same blocks a SM
    // (Llama-3-8B NF4 3.127-3.145 ms/token against 2.970-2.977 on an H200).
    if (takes_register_twin(experts_mma_kernel<P, kF32, U, kSwiglu, false>, experts_mma_kernel<Twin, kF32, U, kSwiglu, false>, warps,
                            partial_bytes<1>(warps), c))
      return f(std::type_identity<Twin>{}, g, warps);
  }
  return f(std::type_identity<P>{}, g, warps);
}

template <typename P, bool kF32, int U, bool kSwiglu = false, bool kGated = false>
Status launch_experts_kernel(const QuantView& geometry, const ExpertGemvArgs& a, cudaStream_t s, const LaunchConfig& c) {
  return with_experts_family<P, kF32, U, kSwiglu>(geometry, c, [&](auto family, const MmaGeometry& g, int warps) {
    return launch_experts_at<typename decltype(family)::type, kF32, U, kSwiglu, kGated>(a, g, s, c, warps);
  });
}

// Whether the gated launch of P takes the activation in its store (launch_experts_at).
template <typename P>
Status gated_in_launch_of(const QuantView& geometry, const LaunchConfig& c, bool* in_launch) {
  return with_experts_family<P, false, 1, false>(geometry, c, [&](auto family, const MmaGeometry&, int warps) {
    *in_launch = !gated_store_costs_blocks<typename decltype(family)::type, false, 1>(c, warps);
    return Status::ok();
  });
}

template <typename P>
Status launch_experts(const QuantView& geometry, const ExpertGemvArgs& a, bool f32, cudaStream_t s, const LaunchConfig& c) {
  // The activation at unroll 1 whatever the variants ask: the step sets no sum's order, and
  // one step's instances keep the compile short.
  if (a.swiglu) return launch_experts_kernel<P, false, 1, true>(geometry, a, s, c);
  if (a.gated) return launch_experts_kernel<P, false, 1, false, true>(geometry, a, s, c);
  const int preset = preset_warps(c, geometry.format, 8, geometry.padded_n / 16);
  return with_step(step_for_warps(gemv_experts_step(c.variants), preset), [&](auto u) {
    return f32 ? launch_experts_kernel<P, true, decltype(u)::value>(geometry, a, s, c) : launch_experts_kernel<P, false, decltype(u)::value>(geometry, a, s, c);
  });
}

// launch_experts for the probe, BF16 output only, at the launch's step.
template <typename P>
Status launch_experts_probe(const QuantView& geometry, const ExpertGemvArgs& a, cudaStream_t s, const LaunchConfig& c) {
  return with_step(step_for_warps(gemv_experts_step(c.variants), preset_warps(c, geometry.format, 8, geometry.padded_n / 16)),
                   [&](auto u) { return launch_experts_kernel<P, false, decltype(u)::value>(geometry, a, s, c); });
}

}  // namespace

bool gemv_mma_supports(const QuantView& v, int batch) {
  const uint64_t chunk = v.format == ViewFormat::kMxfp4 ? MmaMxfp4::kChunk : v.format == ViewFormat::kNvfp4 ? MmaNvfp4::kChunk
                         : v.format == ViewFormat::kNf4 ? MmaNf4<Nf4Table::kSplit>::kChunk : MmaFp8<false>::kChunk;
  if (!v.tiled || v.tile_n != 16 || v.tile_k % chunk != 0 || batch < 1 || batch > 16) return false;
  if (v.padded_k / chunk >= (uint64_t(1) << 31) || uint64_t(v.tile_k) * 16 >= (uint64_t(1) << 31)) return false;
  if ((v.rows / v.n) * (v.padded_n / 16) >= (uint64_t(1) << 31)) return false;
  switch (v.format) {
    // MXFP4's decode reads the uploads' bit-plane order only (a view in the archive's nibble
    // order, made by hand, takes the CUDA-core kernels).
    case ViewFormat::kMxfp4: return v.codes_planes;
    // A lane's run of columns lies in one absmax block: blocks of whole chunks, rows of whole
    // blocks (blocks run over the flat index; a tiled NF4 tensor has K a multiple of them).
    case ViewFormat::kNf4: return v.block_size % MmaNf4<Nf4Table::kSplit>::kChunk == 0 && v.k % v.block_size == 0;
    case ViewFormat::kFp8:
      switch (v.granularity) {
        case 0: case 1: return true;                                     // tensor, channel
        case 2: return v.block_k % MmaFp8<false>::kChunk == 0;    // block
        default: return v.group_size % MmaFp8<false>::kChunk == 0;  // group
      }
    case ViewFormat::kIntGroup: return false;  // (kernels/int_group.cu: CUDA cores only, for now)
    case ViewFormat::kNvfp4: return v.tensor_scale != nullptr && v.nvfp4_mma_safe;  // (quant_view.h says why)
  }
  return false;
}

// The probes' kernels are compiled only on request (a quarter of this file's kernel instances,
// for every GPU target, in a build whose time its compile work bounds: docs/BENCHMARKS.md).
#if !IRIS_KERNEL_PROBES
constexpr const char* kNoProbes = "gemv probe: this build has no measurement probes (configure with -DIRIS_KERNEL_PROBES=ON)";
#else
// Calls f(std::type_identity<P>) for the NF4 probe (KernelVariants::gemv_probe 2 or 3) of the
// BF16-table kernel that view v runs under c; `what` names the launch in the refusal.
template <typename F>
Status with_nf4_probe(const LaunchConfig& c, const QuantView& v, const char* what, F&& f) {
  if (v.format != ViewFormat::kNf4 || !c.nf4_bf16_table || !nf4_scaled_weights(c) || v.tile_k % 128 != 0)
    return unsupported(std::string(what) + " probe: the NF4 probes take NF4's BF16-table kernel in 128-column chunks");
  if (c.variants.gemv_probe == 2) return f(std::type_identity<SkipAbsmax<MmaNf4Scaled<128>>>{});
  if (v.absmax_bf16) return f(std::type_identity<SkipTableFill<MmaNf4Scaled<128, true>>>{});
  return f(std::type_identity<SkipTableFill<MmaNf4Scaled<128>>>{});
}
#endif

Status cuda_gemv_mma(const QuantView& v, const uint16_t* x, int batch, void* y, bool y_f32, void* stream, const LaunchConfig& c) {
  if (!gemv_mma_supports(v, batch)) return unsupported("gemv: the tensor-core kernel does not take this layout");
  auto s = static_cast<cudaStream_t>(stream);
  if (c.variants.gemv_probe) {  // a measurement aid (KernelVariants): BF16 output only
#if IRIS_KERNEL_PROBES
    if (y_f32) return unsupported("gemv probe: BF16 output only");
    if (c.variants.gemv_probe >= 2)
      return with_nf4_probe(c, v, "gemv", [&](auto t) { return launch_probe<typename decltype(t)::type>(v, x, batch, y, s, c); });
    switch (v.format) {
      case ViewFormat::kMxfp4: return launch_probe<SkipDecode<MmaMxfp4>>(v, x, batch, y, s, c);
      case ViewFormat::kNf4: return launch_probe<SkipDecode<MmaNf4<Nf4Table::kSplit>>>(v, x, batch, y, s, c);
      case ViewFormat::kFp8: return launch_probe<SkipDecode<MmaFp8<false>>>(v, x, batch, y, s, c);
      default: return unsupported("gemv probe: not for this format");
    }
#else
    return unsupported(kNoProbes);
#endif
  }
  return with_format(c, v, [&](auto t) { return launch_p<typename decltype(t)::type>(v, x, batch, y, y_f32, s, c); });
}

Status cuda_gemv_experts_mma(const QuantView& geometry, const ExpertGemvArgs& a, bool y_f32, void* stream, const LaunchConfig& c) {
  if (!gemv_mma_supports(geometry, 1)) return unsupported("expert gemv: the tensor-core kernel does not take this layout");
  if (a.pairs * (geometry.padded_n / 16) >= (uint64_t(1) << 31)) return invalid_argument("expert gemv: too many pairs for one launch");
  auto s = static_cast<cudaStream_t>(stream);
  if (c.variants.gemv_probe) {  // a measurement aid (KernelVariants): BF16 output only
#if IRIS_KERNEL_PROBES
    if (y_f32) return unsupported("expert gemv probe: BF16 output only");
    if (a.swiglu || a.gated) return unsupported("expert gemv probe: no activation");
    if (c.variants.gemv_probe >= 2)
      return with_nf4_probe(c, geometry, "expert gemv", [&](auto t) { return launch_experts_probe<typename decltype(t)::type>(geometry, a, s, c); });
    switch (geometry.format) {
      case ViewFormat::kMxfp4: return launch_experts_probe<SkipDecode<MmaMxfp4>>(geometry, a, s, c);
      case ViewFormat::kNf4: return launch_experts_probe<SkipDecode<MmaNf4<Nf4Table::kSplit>>>(geometry, a, s, c);
      case ViewFormat::kFp8: return launch_experts_probe<SkipDecode<MmaFp8<false>>>(geometry, a, s, c);
      default: return unsupported("expert gemv probe: not for this format");
    }
#else
    return unsupported(kNoProbes);
#endif
  }
  return with_format(c, geometry, [&](auto t) { return launch_experts<typename decltype(t)::type>(geometry, a, y_f32, s, c); });
}

Status cuda_experts_gated_in_launch(const QuantView& geometry, const LaunchConfig& c, bool* in_launch) {
  *in_launch = false;
  // A probe (iris bench's measurement aid) refuses the gated launch altogether.
  if (!gemv_mma_supports(geometry, 1) || c.variants.gemv_probe) return Status::ok();
  return with_format(c, geometry, [&](auto t) { return gated_in_launch_of<typename decltype(t)::type>(geometry, c, in_launch); });
}

}  // namespace iris
