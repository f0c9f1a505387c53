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
};

// Produces exactly the planned bytes of one component, in order.
using ComponentProducer = std::function<Status(ByteSink&)>;

}  // namespace iris
