// Helpers for the fast (vectorised) CPU loops of quant/. Internal to quant/*.cpp.
//
// Hot loops are compiled three times (AVX-512, AVX2, baseline x86-64: IRIS_HOT_LOOP_CLONES)
// and each call takes the clone of cpu_path(): the CPU's widest, or a narrower one the
// environment asks for (IRIS_CPU_PATH=avx2 or portable), so that one machine tests and times
// every path it can run. The bits do not depend on the clone: the loops use only correctly
// rounded IEEE operations, and quant/ is built with -ffp-contract=off, so no clone fuses a
// multiply and an add.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/float_bits.h"

// Inlined into whichever clone calls it.
#define IRIS_INLINE inline __attribute__((always_inline))

// A hot loop NAME_body (an IRIS_INLINE function) compiled three times, as NAME_avx512,
// NAME_avx2 and NAME_portable; NAME_on(path, ...) calls the one of `path` (tests compare the
// paths with it) and NAME the one of cpu_path(). TEMPLATE is the parenthesised template head
// (or ()), TARGS its arguments as the clones are called (or ()), PARAMS the parenthesised
// parameters and ARGS the names passed on.
#if defined(__x86_64__) && defined(__GNUC__)
#define IRIS_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2")))
#define IRIS_TARGET_AVX2 __attribute__((target("avx2")))
#define IRIS_AVX2_CASE(CALL) \
  case ::iris::quant::detail::CpuPath::kAvx2: return CALL;
#else
#define IRIS_TARGET_AVX512
#define IRIS_TARGET_AVX2
#define IRIS_AVX2_CASE(CALL)
#endif
#define IRIS_UNPAREN(...) __VA_ARGS__
#define IRIS_HOT_LOOP_CLONES(TEMPLATE, TARGS, RET, NAME, PARAMS, ARGS)                                                         \
  IRIS_UNPAREN TEMPLATE [[maybe_unused]] IRIS_TARGET_AVX2 RET NAME##_avx2 PARAMS { return NAME##_body IRIS_UNPAREN TARGS ARGS; } \
  IRIS_HOT_LOOP_CLONES_AVX2_BY_HAND(TEMPLATE, TARGS, RET, NAME, PARAMS, ARGS)

// The same where the compiler's AVX2 compilation of the body falls short and NAME_avx2 is
// written by hand (with intrinsics, the same bits), declared before this: only the AVX-512 and
// portable clones are compiled from NAME_body.
#define IRIS_HOT_LOOP_CLONES_AVX2_BY_HAND(TEMPLATE, TARGS, RET, NAME, PARAMS, ARGS)                                    \
  IRIS_UNPAREN TEMPLATE IRIS_TARGET_AVX512 RET NAME##_avx512 PARAMS { return NAME##_body IRIS_UNPAREN TARGS ARGS; } \
  IRIS_UNPAREN TEMPLATE RET NAME##_portable PARAMS { return NAME##_body IRIS_UNPAREN TARGS ARGS; }                  \
  IRIS_UNPAREN TEMPLATE RET NAME##_on(::iris::quant::detail::CpuPath path, IRIS_UNPAREN PARAMS) {                  \
    switch (path) {                                                                                                 \
      case ::iris::quant::detail::CpuPath::kAvx512: return NAME##_avx512 IRIS_UNPAREN TARGS ARGS;                   \
      IRIS_AVX2_CASE(NAME##_avx2 IRIS_UNPAREN TARGS ARGS)                                                           \
      default: return NAME##_portable IRIS_UNPAREN TARGS ARGS;                                                     \
    }                                                                                                               \
  }                                                                                                                 \
  IRIS_UNPAREN TEMPLATE [[maybe_unused]] RET NAME PARAMS { return NAME##_on IRIS_UNPAREN TARGS(::iris::quant::detail::cpu_path(), IRIS_UNPAREN ARGS); }

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

// The vector path of every hot loop and intrinsic path: the CPU's widest (kAvx512 needs
// AVX-512 F, BW, CD, DQ and VL: x86-64-v4), or a narrower one named by the environment
// variable IRIS_CPU_PATH (avx512, avx2, portable; a path the CPU lacks, or an unknown name,
// leaves the CPU's). Read once for the process, like the CPU's features it stands for.
enum class CpuPath { kPortable, kAvx2, kAvx512 };
CpuPath cpu_path();
// The path the CPU itself offers, whatever the environment asks.
CpuPath cpu_best_path();
const char* cpu_path_name(CpuPath p);

#ifdef IRIS_X86_INTRINSICS
inline bool cpu_has_avx512f() { return cpu_path() == CpuPath::kAvx512; }
inline bool cpu_has_avx2() { return cpu_path() >= CpuPath::kAvx2; }
#endif

}  // namespace iris::quant::detail
