// Hot loops get an AVX2+FMA-free AVX2 clone next to the baseline x86-64 code; the loader
// picks the clone on CPUs that have AVX2. Rounding is unchanged (-ffp-contract=off, no FMA
// in the clone's target), so both clones give the same bits.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IRIS_HOT_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define IRIS_HOT_LOOP
#endif

// Inlined into whichever clone calls it.
#define IRIS_INLINE inline __attribute__((always_inline))

// max(m, |v|) ignoring a NaN v, like fmaxf, but without its libm call (NaN compares false).
IRIS_INLINE float max_abs(float m, float v) {
  const float a = v < 0.f ? -v : v;
  return a > m ? a : m;
}
