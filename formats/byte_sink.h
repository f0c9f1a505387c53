// Where producers push the bytes of one archive component or exported tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "common/status.h"

namespace iris {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status write(std::span<const uint8_t> bytes) = 0;
  // Optional: room for up to `max` of the next bytes in the sink's own buffer, for a producer
  // that can fill it in place (a file read straight into the archive writer's buffer saves a
  // copy). Empty when the sink has none (or cannot give it now: write() then says why). After
  // a non-empty room, commit() of its filled prefix stands for write() of those bytes.
  virtual std::span<uint8_t> room(uint64_t /*max*/) { return {}; }
  virtual Status commit(std::span<const uint8_t> filled) { return write(filled); }
};

// Produces exactly the planned bytes of one component, in order.
using ComponentProducer = std::function<Status(ByteSink&)>;

}  // namespace iris
