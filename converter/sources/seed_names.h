// The seed engine's gpt-oss tensor names (its convert_to_iris.py), both ways: where a Hugging
// Face tensor goes in a .iris v1 archive, and which Hugging Face tensor a v1 entry was. One
// table for the v1 writer (export_v1) and the v1 source (hf/v1_snapshot).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "formats/iris_v1.h"

namespace iris {

struct SeedSlot {
  std::string name;     // v1 name: "embed", "L3.w_q", ...
  V1DType dtype;        // what the seed stores it as
  uint64_t layer;       // 0 for the top-level tensors, l + 1 for layer l
  int rank;             // order within its layer (the seed's order)
  bool widened;         // the seed widens this tensor to FP32 (norms, sinks)
};

// The slot of a Hugging Face gpt-oss tensor name; nullopt when the seed has none for it.
std::optional<SeedSlot> seed_slot(const std::string& hf_name);

// The Hugging Face name of a v1 entry name; nullopt when it is not one of the seed's.
std::optional<std::string> hf_name_of_seed(const std::string& v1_name);

}  // namespace iris
