// The pieces of add_error_sums (error_sums.h), shared with the encoders that gather the same
// sums while they encode (mxfp4_encode_sums.cpp): the sums are defined by this structure, so
// every caller gets the same bits. Internal to quant/*.cpp.
//
// A run of n elements is cut into blocks of kBlock; a block into groups of kGroup. Lane l of a
// group takes its elements l, l + 16, ... and sums r^2 and e^2 (e = got - r) in float, 16 terms
// per lane, in element order; the group's lane sums then go into the block's double lanes. A
// group whose largest value or error lies beyond 2^60 (16 squares could overflow float) or
// below 2^-40 but not 0 (they could vanish) is summed again exactly, in double. The tail of a
// block (< kGroup) is summed exactly. A block's lanes are added up in lane order and merged
// into the total in block order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/error_sums.h"
#include "quant/simd.h"

namespace iris::quant::detail {

constexpr int kSumLanes = 16;                       // interleaved partial sums: one AVX-512 vector of floats
constexpr int kSumGroup = 256;                      // elements summed in float before the sums go to double
constexpr uint64_t kSumBlock = uint64_t(1) << 16;   // elements per block
constexpr float kSumBig = 0x1p60f, kSumSmall = 0x1p-40f;  // the range summed in float

// A block's double lanes and the float maximum of its errors.
struct SumLanes {
  double sr[kSumLanes] = {}, se[kSumLanes] = {};
  float mx[kSumLanes] = {};
};

// Elements [0, n) exactly, in double, element j into lane j % kSumLanes, and their largest
// error into mx unless it is null: the groups out of float's range (whose maximum the float
// pass already took) and the tail.
IRIS_INLINE void exact_sums(const float* ref, const float* got, uint64_t n, double* sr, double* se, float* mx) {
  for (uint64_t j = 0; j < n; ++j) {
    const float r = ref[j];
    if ((f32_bits(r) & 0x7f800000u) == 0x7f800000u) continue;
    const double e = double(got[j]) - double(r);
    sr[j % kSumLanes] += double(r) * double(r);
    se[j % kSumLanes] += e * e;
    if (mx) mx[j % kSumLanes] = std::max(mx[j % kSumLanes], float(std::fabs(e)));
  }
}

// Whether a group's float lanes (largest |value| gmr, largest |error| gme) must be summed
// again exactly. NaN maxima cannot occur (std::max keeps the earlier value over a NaN).
IRIS_INLINE bool group_out_of_range(float gmr, float gme) {
  return !(gmr <= kSumBig && gme <= kSumBig) || (gmr < kSumSmall && gmr != 0.f) || (gme < kSumSmall && gme != 0.f);
}

// One group of kSumGroup elements into the block's lanes. A select leaves out the non-finite
// sources.
IRIS_INLINE void group_sums(const float* ref, const float* got, SumLanes& s) {
  float gr[kSumLanes] = {}, ge[kSumLanes] = {}, gmr[kSumLanes] = {}, gme[kSumLanes] = {};
  for (int j = 0; j < kSumGroup; j += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) {
      const float r = ref[j + l];
      const bool finite = (f32_bits(r) & 0x7f800000u) != 0x7f800000u;
      const float rf = finite ? r : 0.f;
      const float e = finite ? got[j + l] - r : 0.f;
      gr[l] += rf * rf;
      ge[l] += e * e;
      gmr[l] = std::max(gmr[l], std::fabs(rf));
      gme[l] = std::max(gme[l], std::fabs(e));
    }
  bool redo = false;
  for (int l = 0; l < kSumLanes; ++l) {
    s.mx[l] = std::max(s.mx[l], gme[l]);
    redo |= group_out_of_range(gmr[l], gme[l]);
  }
  if (redo) {
    exact_sums(ref, got, kSumGroup, s.sr, s.se, nullptr);
    return;
  }
  for (int l = 0; l < kSumLanes; ++l) {
    s.sr[l] += double(gr[l]);
    s.se[l] += double(ge[l]);
  }
}

// A finished block (its tail already summed) into the total, and its lanes cleared.
IRIS_INLINE void close_block(SumLanes& s, ErrorSums* into) {
  ErrorSums part;
  for (int l = 0; l < kSumLanes; ++l) part.merge({s.sr[l], s.se[l], double(s.mx[l])});
  into->merge(part);
  s = SumLanes();
}

// The sums of values given a few at a time, equal to add_error_sums over all of them at
// once: a group is buffered until it is whole. For encoders without a vector path.
class ErrorSumsStream {
 public:
  explicit ErrorSumsStream(ErrorSums* into) : into_(into) {}
  void add(const float* ref, const float* got, uint64_t n) {
    while (n) {
      const uint64_t take = std::min<uint64_t>(n, kSumGroup - fill_);
      std::copy(ref, ref + take, ref_ + fill_);
      std::copy(got, got + take, got_ + fill_);
      fill_ += take;
      ref += take;
      got += take;
      n -= take;
      if (fill_ == kSumGroup) {
        group_sums(ref_, got_, lanes_);
        fill_ = 0;
        in_block_ += kSumGroup;
        if (in_block_ == kSumBlock) {
          close_block(lanes_, into_);
          in_block_ = 0;
        }
      }
    }
  }
  // The tail: after it, the stream starts a new run.
  void finish() {
    if (!fill_ && !in_block_) return;
    exact_sums(ref_, got_, fill_, lanes_.sr, lanes_.se, lanes_.mx);
    close_block(lanes_, into_);
    fill_ = 0;
    in_block_ = 0;
  }

 private:
  ErrorSums* into_;
  float ref_[kSumGroup], got_[kSumGroup];
  uint64_t fill_ = 0, in_block_ = 0;
  SumLanes lanes_;
};

}  // namespace iris::quant::detail
