// Finding NaN and Inf before encoding. The encoders never crash on them, but what they
// produce is a format's convention, not a useful weight (mxfp4.h, nf4.h and fp8.h say
// what each does), so a converter should check its input with these first.
#pragma once

#include <cstdint>

namespace iris::quant {

// The number of NaN or +-Inf values among x[0, n). If first_index is not null it receives
// the index of the first one, or n when there is none. Parallel (common/parallel_for.h).
uint64_t count_nonfinite(const float* x, uint64_t n, uint64_t* first_index);
// The same for BF16 bit patterns.
uint64_t count_nonfinite_bf16(const uint16_t* x, uint64_t n, uint64_t* first_index);

}  // namespace iris::quant
