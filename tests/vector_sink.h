// A ByteSink that keeps what it is given (formats/byte_sink.h): what the producer tests compare
// with the bytes they expect.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "formats/byte_sink.h"

namespace iris::testing_sinks {

class VectorSink final : public ByteSink {
 public:
  Status write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    ++writes;
    return Status::ok();
  }
  std::vector<uint8_t> bytes;
  int writes = 0;  // calls of write(): how many pieces the producer wrote
};

}  // namespace iris::testing_sinks
