// A quantized tensor as the kernels see it: device pointers to its components plus the
// geometry and parameters of its descriptor, flattened into plain fields (no JSON, no
// std:: containers) so the struct can be passed to a kernel by value.
#pragma once

#include <cstdint>
#include <array>
#include <span>

#include "common/status.h"
#include "formats/tensor_desc.h"

namespace iris {

// kNf4 covers both bitsandbytes 4-bit formats (nf4 and bnb_fp4): they differ only in the
// 16-value code book, which the kernels read from the tensor's code_table component.
enum class ViewFormat : uint32_t { kMxfp4 = 1, kNf4 = 2, kFp8 = 3, kIntGroup = 4, kNvfp4 = 5 };
enum class ScaleType : uint32_t { kU8 = 0, kF32 = 1, kBf16 = 2, kF16 = 3 };

struct QuantView {
  ViewFormat format;
  // Logical geometry: `rows` = batch * N rows of K elements. NF4 in the flat layout is one
  // row of numel elements (its blocks ignore rows).
  uint64_t rows, n, k;
  bool tiled;
  uint64_t tile_n, tile_k, padded_n, padded_k;
  const uint8_t* codes;
  const void* scales;  // mxfp4: E8M0 bytes; fp8: scale_type; nf4: absmax (u8 codes or f32)
  ScaleType scale_type;
  // fp8
  uint32_t granularity;  // ScaleGranularity
  uint64_t block_n, block_k, group_size;
  // nf4 / bnb fp4
  uint32_t block_size, nested_block_size;
  bool double_quant;
  float nested_offset;
  const float* nested_absmax;
  const float* code_table;         // 16 entries
  const float* nested_code_table;  // 256 entries
  // Optional: bf16(absmax) of each block (cuda_nf4_absmax_bf16), set by the owner of an upload
  // whose NF4 GEMVs take the declared BF16 table; those GEMVs then read it in place of the
  // absmax above, for the same bits. nullptr otherwise.
  const uint16_t* absmax_bf16;
  // Precomputed so that no kernel divides by a runtime 64-bit value per element:
  // log2 of power-of-two divisors (-1 when not a power of two).
  int32_t block_shift, nested_shift, block_n_shift, block_k_shift, group_shift;
  bool single_matrix;  // rows == n: the matrix index is always 0
  bool fp8_uniform8;   // FP8: one scale covers every aligned run of 8 elements
  // MXFP4: each 32-bit word of the codes holds its eight codes in the kernels' bit-plane order
  // (kernels/mxfp4_planes.h) rather than the archive's nibble order. Set by
  // cuda_mxfp4_to_planes, which rearranges the words; the tensor-core GEMVs take only such
  // views, the dequant and CUDA-core kernels either order.
  bool codes_planes;
  // int_group (FORMAT.md 4.5; group_size above, scale_type the scales'): the code width, the
  // zero points (u8 [rows, groups]; null: every one 2^(code_bits-1)) and the permutation (u32
  // [matrices, k]; null: none).
  uint32_t code_bits;
  const uint8_t* zero_points;
  const uint32_t* permutation;
  float post_factor = 1.0f;  // each value times it after its scale (LLM.int8's FP32 1/127)
  // nvfp4 (FORMAT.md 4.6; scales: the E4M3 bytes): one FP32 tensor scale a matrix, and the
  // producing tool's convention (quant/nvfp4.h).
  const float* tensor_scale;
  bool nvfp4_divides, nvfp4_negative_zero;
  // Every tensor scale of the view lets the tensor-core GEMV's order of operations (exact
  // weights, the tensor scale on the sums) stand for the reference's (each block scale
  // e4m3 * t rounded to FP32, then each weight): no block scale leaves FP32's normal range, so
  // no decoded weight is infinite, NaN (0 * inf) or a rounded subnormal where the sums would
  // not be. Set by whoever knows the scales (uploads: nvfp4_tensor_scales_mma_safe; or
  // cuda_nvfp4_mark_mma_safe); false sends the view's GEMVs to the CUDA cores, which decode
  // each weight as the reference does.
  bool nvfp4_mma_safe = false;
};

// Whether NVFP4 tensor scales (FP32, one a matrix) keep every block scale e4m3 * t (or e4m3 /
// t) inside FP32's normal range with room for E2M1's 6: t finite and nonzero, |t| in [2^-117,
// 2^115] (multiplies) or [2^-115, 2^117] (divides). QuantView::nvfp4_mma_safe.
bool nvfp4_tensor_scales_mma_safe(std::span<const uint8_t> tensor_scales, bool divides);
// The same of a view's tensor scales, read from the device (a copy and a synchronization):
// sets v.nvfp4_mma_safe. For views made from device pointers by hand (tests, benchmarks).
Status cuda_nvfp4_mark_mma_safe(QuantView& v);

// The device address of each component of a tensor, indexed by Role (nullptr: none).
using DevicePointers = std::array<const void*, kRoleCount>;

// Builds a view from a descriptor and the device address of each component.
// Fails (kUnsupported) for layouts the kernels were not built for, never guessing.
Result<QuantView> make_quant_view(const TensorDesc& desc, const DevicePointers& components);

// Matrix `m` of a tiled [E, N, K] stack as a view of its own (an MoE expert): its codes and
// scales are contiguous runs of the stack's, so only pointers move. kUnsupported for NF4 with
// double quantization when the matrix's first absmax is not the first of a nested block.
Result<QuantView> matrix_view(const QuantView& stack, uint64_t m);

// The bytes of one matrix of a tiled view, the strides matrix_view steps by: its codes (padded
// N x padded K at the format's bits), and an MXFP4 matrix's E8M0 scales (N rows of ceil(K / 32)).
uint64_t matrix_code_bytes(const QuantView& v);
uint64_t mxfp4_matrix_scale_bytes(const QuantView& v);

// A tiled [N, K] matrix as a stack of N / rows matrices of `rows` rows each (for matrix_view:
// several projections of one input in one grouped launch, e.g. q cut into k's height). The
// bytes do not move: stripes, MXFP4 scale rows, FP8 scale rows and NF4 absmax blocks are
// already in row order. kInvalidArgument unless rows divides N and is a multiple of the tile
// height (and of the FP8 scale block's height; N unpadded).
Result<QuantView> row_blocks_view(const QuantView& matrix, uint64_t rows);

}  // namespace iris
