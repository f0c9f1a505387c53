// Decodes rows of a source tensor (any format a snapshot can hold) into FP32, reading only
// what those rows need: the input side of requantization.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "converter/sources/source_tensors.h"
#include "converter/sources/tiled_codes.h"

namespace iris {

// A caller's buffers for decode_rows: the source bytes of the chunk being decoded. One per
// thread, so that several threads can decode row ranges of one tensor at once.
struct DecodeScratch {
  std::vector<uint8_t> codes, aux, nested;
  TiledScratch tiled;  // an archive source's stripes, untiled into codes
  // A packed-integer source's zero points and scales of the rows, unpacked (packed_integers.h).
  std::vector<int32_t> zeros;
  std::vector<float> scales;
};

class SourceDecoder {
 public:
  static Result<std::unique_ptr<SourceDecoder>> create(const SourceTensor& source);
  virtual ~SourceDecoder() = default;
  // The tensor as rows x k (k = last dimension; rank <= 1 is one row).
  uint64_t rows() const { return rows_; }
  uint64_t k() const { return k_; }
  // Exact FP32 values of rows [r0, r1), row-major, into out. Safe to call from several
  // threads at once, each with its own scratch.
  virtual Status decode_rows(uint64_t r0, uint64_t r1, float* out, DecodeScratch& scratch) const = 0;
  // The same with the decoder's own scratch: one thread at a time.
  Status decode_rows(uint64_t r0, uint64_t r1, float* out) { return decode_rows(r0, r1, out, own_); }
  // BF16 sources only: the raw bit patterns of rows [r0, r1), read into scratch, for passes
  // that can work on them directly (they widen to FP32 exactly) and so skip the widening.
  // Null for every other source.
  virtual Result<const uint16_t*> raw_bf16_rows(uint64_t, uint64_t, DecodeScratch&) const { return nullptr; }

 protected:
  uint64_t rows_ = 0, k_ = 0;

 private:
  DecodeScratch own_;
};


}  // namespace iris
