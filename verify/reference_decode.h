// The CPU reference decode of one archive tensor: untile the codes, then run the scalar
// oracle of quant/. Everything that must agree with it (the CUDA kernels, export) is
// checked against this.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/tensor_desc.h"
#include "quant/fp8.h"
#include "quant/nf4.h"

namespace iris {

using ComponentBytes = std::map<std::string, std::span<const uint8_t>>;

// The quant/ parameter structs for a descriptor and its component bytes.
quant::Bnb4bitParams bnb4_params(const TensorDesc& desc, const ComponentBytes& components);
quant::Fp8Scales fp8_scales(const TensorDesc& desc, const void* scales);

// Row-major codes (what the source checkpoint held) from the archive's tiled codes.
std::vector<uint8_t> untile_codes(const TensorDesc& desc, std::span<const uint8_t> tiled);

// Decodes the whole tensor into `out` (numel FP32 values, row-major logical shape).
Status reference_decode(const TensorDesc& desc, const ComponentBytes& components, float* out);

}  // namespace iris
