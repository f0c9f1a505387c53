// The CPU reference decode of one archive tensor: untile the codes, then run the codecs of
// quant/. Everything that must agree with it (the CUDA kernels, `iris export`, the C API's
// iris_dequantize_rows) is this code or is checked against it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "formats/tensor_desc.h"
#include "quant/fp8.h"
#include "quant/nf4.h"

namespace iris {

// A tensor's component bytes, indexed by role (empty spans for roles it does not have).
using ComponentBytes = std::array<std::span<const uint8_t>, kRoleCount>;

// The quant/ parameter structs of a validated descriptor and its component bytes.
quant::Bnb4bitParams bnb4_decode_params(const Bnb4Params& p, const ComponentBytes& components);
quant::Fp8Scales fp8_decode_scales(const Fp8Params& p, const void* scales);

// An int_group tensor's permutation component (FORMAT.md 4.5: u32 [..., K], one per matrix)
// checked to be one: every matrix's K entries a permutation of 0..K-1. Every reader checks it
// before placing a value by it (the CPU decoders, libiris's GPU upload).
Status check_int_group_permutation(const TensorDesc& desc, std::span<const uint8_t> permutation);

// Row-major codes (what the source checkpoint held) from the archive's tiled codes.
std::vector<uint8_t> untile_codes(const TensorDesc& desc, std::span<const uint8_t> tiled);

// The [rows, K] view every decode uses: K = the last dimension (1 for a scalar), rows =
// numel / K (0 when the tensor is empty).
struct RowView {
  uint64_t rows = 0, k = 0;
};
RowView row_view(const TensorDesc& desc);

// Decodes rows [row0, row1) into `out` ((row1 - row0) * K values of out_dtype: F32, F16 or
// BF16), each value the FP32 reference rounded once. Raw tensors of a float dtype are
// converted the same way (and copied bit for bit when out_dtype is their own dtype); other
// raw tensors are kUnsupported. Memory beyond `out`: the untiled codes of the rows being
// decoded (at most a byte per value) and, for F16/BF16 output, an FP32 buffer of up to 4M
// values at a time. Does not hash anything.
Status decode_rows(const TensorDesc& desc, const ComponentBytes& components, uint64_t row0, uint64_t row1, DType out_dtype,
                   void* out);

// The whole tensor as FP32 (numel values, row-major logical shape).
Status reference_decode(const TensorDesc& desc, const ComponentBytes& components, float* out);

}  // namespace iris
