// Helpers for the fast (vectorised) CPU loops of quant/. Internal to quant/*.cpp.
//
// Hot loops are compiled three times (AVX-512, AVX2, baseline x86-64) and the loader picks
// the best clone for the CPU. The bits do not depend on the clone: the loops use only
// correctly rounded IEEE operations, and quant/ is built with -ffp-contract=off, so no clone
// fuses a multiply and an add.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/float_bits.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IRIS_HOT_LOOP __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define IRIS_HOT_LOOP
#endif

// Inlined into whichever clone calls it.
#define IRIS_INLINE inline __attribute__((always_inline))

// Loops written with AVX-512 intrinsics (where the vectoriser cannot find the instruction:
// a permute as a 16-entry table lookup) are functions of their own with a target attribute,
// called when the CPU has the instructions and replaced by the plain loop otherwise.
#if defined(__x86_64__) && defined(__GNUC__)
#define IRIS_X86_INTRINSICS 1
#define IRIS_AVX512 __attribute__((target("avx512f")))
#define IRIS_AVX2 __attribute__((target("avx2")))
#endif

namespace iris::quant::detail {

// Which vector path an encoder takes: the widest the CPU has (kBest), or one forced for tests
// and benchmarks (a path the CPU lacks falls back to the portable one).
enum class VectorPath { kBest, kAvx512, kAvx2, kPortable };

// Encoder inputs are FP32 or raw BF16 bit patterns (uint16_t); both widen exactly to FP32.
IRIS_INLINE float load_f32(float x) { return x; }
IRIS_INLINE float load_f32(uint16_t bf16) { return f32_from_bits(uint32_t(bf16) << 16); }

// Decoder outputs are FP32, or BF16 rounded once from the FP32 value (nearest even).
IRIS_INLINE void store_value(float* out, float v) { *out = v; }
IRIS_INLINE void store_value(uint16_t* out, float v) { *out = f32_to_bf16(v); }

// |x| as FP32 bits with NaN mapped to 0: the unsigned maximum of these is the amax of the
// finite and infinite values, ignoring NaN (like fmaxf), and vectorises as an integer max.
IRIS_INLINE uint32_t abs_bits_no_nan(float x) {
  const uint32_t a = f32_bits(x) & 0x7fffffffu;
  return a * uint32_t(a <= 0x7f800000u);  // arithmetic, not a select: keeps max-reductions vectorisable
}

// Packs 2n 4-bit codes (one per byte) into n bytes. Reading the pair (c[2j], c[2j+1]) as one
// little-endian uint16 w = c0 | c1 << 8 turns packing into a shift and an or, which the
// compiler vectorises (no even/odd shuffles).
IRIS_INLINE uint8_t pack_low_first(uint16_t w) { return uint8_t(w | (w >> 4)); }   // c0 | c1 << 4
IRIS_INLINE uint8_t pack_high_first(uint16_t w) { return uint8_t((w << 4) | (w >> 8)); }  // c0 << 4 | c1
IRIS_INLINE uint16_t load_pair(const uint8_t* c) {
  uint16_t w;
  std::memcpy(&w, c, 2);  // little-endian host: c[0] is the low byte
  return w;
}

#ifdef IRIS_X86_INTRINSICS
// A property of the CPU, read once for the process (like the clones' resolvers).
inline bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace iris::quant::detail
