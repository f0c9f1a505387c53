// What one archive tensor is: its logical shape and dtype, its storage format, the format's
// parameters and the layout of its codes. From a TensorDesc alone, component_specs() derives
// every data component the archive must hold for it (role, dtype, shape, bytes). The writer
// plans with it and the reader checks against it, so the two can never disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "formats/dtype.h"
#include "formats/format_traits.h"

namespace iris {

enum class LayoutKind { kRowMajor, kTiled, kFlat };
const char* layout_kind_name(LayoutKind k);

// Codes of quantized [..., N, K] weights are stored in tiles of tile_n x tile_k elements.
// Tiles of one stripe of tile_n rows are contiguous across the whole (padded) K; stripes follow
// in order; each [N, K] matrix of a stack is complete before the next. Inside a tile, rows are
// in order and each row's tile_k elements are contiguous (packed as the format packs them).
struct Layout {
  LayoutKind kind = LayoutKind::kRowMajor;
  uint64_t tile_n = 0;
  uint64_t tile_k = 0;
};

struct TensorDesc {
  std::string name;
  std::vector<uint64_t> shape;  // logical; for weights [..., N, K], row = output
  DType dtype;                  // logical element type (what dequantization produces)
  Format format = Format::kRaw;
  nlohmann::json params = nlohmann::json::object();  // format parameters as stored (FORMAT.md); read
                                                    // them through the typed parsers of format_traits.h
  Layout layout;
};

struct ComponentSpec {
  Role role;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};

// Geometry of a quantized weight viewed as `batch` matrices of [n, k].
struct MatrixGeometry {
  uint64_t batch = 1, n = 0, k = 0;
  uint64_t stored_k = 0;           // k rounded up to the format's packing unit (the source row width)
  uint64_t padded_n = 0, padded_k = 0;
  uint32_t code_bits = 0;          // 4 or 8 (int_group: 2, 3, 4 or 8)
  uint8_t pad_byte = 0;            // byte written into padding (decodes to zero)
  uint64_t row_bytes() const { return stored_k * code_bits / 8; }
  uint64_t padded_row_bytes() const { return padded_k * code_bits / 8; }
};

// "tensor 'NAME': ", the start of every error message about the tensor d.
std::string tensor_context(const TensorDesc& d);

// How a tensor is stored, as reports name it: the quantized format ("mxfp4", "nf4", "bnb_fp4",
// "fp8_e4m3") or, unquantized, its dtype ("bf16").
std::string storage_name(const TensorDesc& d);

// Validates `d` (shape, params, layout) and returns its components in archive order.
Result<std::vector<ComponentSpec>> component_specs(const TensorDesc& d);
// For quantized tensors with a tiled layout: the matrix view. Errors for flat/raw.
Result<MatrixGeometry> matrix_geometry(const TensorDesc& d);

// Elements per scale block along a row: 32 (mxfp4), the bitsandbytes block_size (0 while the
// parameter is absent or malformed; component_specs reports that), 0 for other formats.
uint32_t format_block_size(const TensorDesc& d);

// Chooses the codes layout for a quantized tensor: tiled when the blocks follow rows,
// flat otherwise. tile_n x tile_k is the largest tile: tiles shrink to fit small matrices, and
// to the width among tile_k, tile_k / 2, ... (>= kMinTileK) that pads the rows least.
Layout choose_layout(const TensorDesc& d, uint64_t tile_n, uint64_t tile_k);

// Default tile shape (FORMAT.md "Default tiles").
constexpr uint64_t kDefaultTileN = 16;
constexpr uint64_t kDefaultTileK = 256;
// The narrowest tile choose_layout picks to save padding: one chunk of the tensor-core GEMV
// for every format (128 MXFP4 columns; kernels/gemv_mma.cu).
constexpr uint64_t kMinTileK = 128;

}  // namespace iris
