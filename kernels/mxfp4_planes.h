// MXFP4 code words in the kernels' order ("bit planes"), as libiris holds them on the device.
//
// The archive stores eight E2M1 codes in a 32-bit little-endian word, element 2j in the low
// nibble of byte j and element 2j + 1 in its high nibble (FORMAT.md: nibble order). The
// tensor-core GEMV turns a word into four bf16x2 pairs (elements 2j, 2j + 1) whose BF16 bits
// hold a code's three magnitude bits at 6..8 (22..24 for the odd element) and its sign at 15
// (31). From nibbles that takes two masks, then a byte permute, a multiply and an AND a pair.
// Stored so that one shift and one AND put three of the pairs' bits in place (the fourth: a
// shift, an AND, one multiply making three disjoint copies, an AND), the decode is 13
// instructions a word instead of 19 (kernels/NOTES.md, runs v67 and v68). The word's bit of
// each code bit (m0..m2 magnitude, s sign):
//
//   element | m0 m1 m2  s      element | m0 m1 m2  s
//   0       |  6  7  8 15      1       | 22 23 24 31
//   2       |  3  4  5 12      3       | 19 20 21 28
//   4       |  0  1  2  9      5       | 16 17 18 25
//   6       | 14 10 11 13      7       | 30 26 27 29
//
// A permutation of each word's 32 bits: the bytes of a tensor stay where the archive has
// them, only the bits inside each aligned word of the codes move. Plain C++ (no intrinsics),
// so the upload's kernel, the CUDA-core decoders and the CPU tests share it.
#pragma once

#include <cstdint>

#include "common/float_bits.h"  // IRIS_HD

namespace iris {

// The sign and magnitude bits of a bf16x2 pair of E2M1 values scaled by 2^-126.
inline constexpr uint32_t kMxfp4PairBits = 0x81C081C0u;

// Elements 2j and 2j + 1 of a nibble-order word as a pair's bits (magnitude at 6..8 / 22..24,
// sign at 15 / 31).
IRIS_HD constexpr uint32_t mxfp4_nibbles_pair(uint32_t w, int j) {
  const uint32_t lo = (w >> (8 * j)) & 0xFu, hi = (w >> (8 * j + 4)) & 0xFu;
  return ((lo & 7u) << 6) | ((lo & 8u) << 12) | ((hi & 7u) << 22) | ((hi & 8u) << 28);
}

// Pair j of a bit-plane word (the decode the tensor-core kernels do, less the scale).
IRIS_HD constexpr uint32_t mxfp4_planes_pair(uint32_t p, int j) {
  if (j < 3) return (p << (3 * j)) & kMxfp4PairBits;
  // Bits {10,11,13,14,26,27,29,30} moved down by 8, then copies at +0, +5 and +10 (disjoint
  // in every bit the AND keeps, so the multiply carries into none of them).
  return (((p >> 8) & 0x006C006Cu) * 0x421u) & kMxfp4PairBits;
}

// A nibble-order word in the kernels' bit-plane order.
IRIS_HD constexpr uint32_t mxfp4_word_to_planes(uint32_t w) {
  const uint32_t q3 = mxfp4_nibbles_pair(w, 3);
  return mxfp4_nibbles_pair(w, 0) | (mxfp4_nibbles_pair(w, 1) >> 3) | (mxfp4_nibbles_pair(w, 2) >> 6) |
         ((q3 & 0x00400040u) << 8) | ((q3 & 0x01800180u) << 3) | ((q3 & 0x80008000u) >> 2);
}

// A bit-plane word back in nibble order (the CUDA-core decoders, which look codes up).
IRIS_HD constexpr uint32_t mxfp4_planes_to_word(uint32_t p) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j) {
    const uint32_t q = mxfp4_planes_pair(p, j);
    const uint32_t lo = ((q >> 6) & 7u) | ((q >> 12) & 8u), hi = ((q >> 22) & 7u) | ((q >> 28) & 8u);
    w |= (lo | (hi << 4)) << (8 * j);
  }
  return w;
}

}  // namespace iris
