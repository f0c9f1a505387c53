// A one-dimensional U8 tensor: the simplest thing the archive writer's tests store.
#pragma once

#include <string>

#include "formats/tensor_desc.h"

namespace iris {

inline TensorDesc flat_u8(const std::string& name, uint64_t n) {
  TensorDesc d;
  d.name = name;
  d.shape = {n};
  d.dtype = DType::kU8;
  return d;
}

}  // namespace iris
