// Integer codes packed into int32 words with group scales and zero points, as GPTQ (v1, v2),
// AWQ (GEMM) and compressed-tensors' pack-quantized checkpoints store a linear weight
// (FORMATS.md 7.1-7.3). Each scheme (sources/schemes/) checks its companions and describes
// them here; the decoder unpacks any of them and dequantizes with quant/int_group.h's
// arithmetic, bit for bit the tool's own.
//
// Where each packing puts the code of weight (n, k) of an [N, K] matrix:
//   GPTQ           qweight  I32 [K * bits / 32, N]: column n's words are one little-endian bit
//                  stream along K, code k at bit bits * k (3 bits straddle words).
//                  qzeros   I32 [G, N * bits / 32]: row g's words a bit stream along N.
//                  scales   [G, N]; g_idx I32 [K], the group of input row k.
//   AWQ            qweight  I32 [K, N / 8]: word w of row k holds columns 8w + {0,2,4,6,1,3,5,7}
//                  at nibbles 0..7; qzeros I32 [G, N / 8] the same; scales [G, N].
//   compressed-    weight_packed I32 [N, ceil(K / (32 / bits))]: 32 / bits codes a word, code k
//   tensors        of row n at bit bits * (k % (32 / bits)) of word k / (32 / bits); codes are
//                  stored offset by 2^(bits-1). weight_zero_point I32 [ceil(N / (32 / bits)), G]
//                  packed the same way along N, offset alike; weight_scale [N, G];
//                  weight_g_idx I32 [K].
//   bitsandbytes   weight I8 [N, K], row-major, the signed code itself; SCB F32 [N], one scale
//   LLM.int8       a row (its absmax); no zero point. Decoded as (q * SCB) * post_factor, the
//                  FP32 1/127 (quant/int_group.h). Held here as unsigned codes q + 128 with
//                  the implicit zero 128, as compressed-tensors' symmetric codes are.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "converter/sources/snapshot.h"

namespace iris {

class SourceDecoder;
struct DecodeScratch;
struct SourceTensor;

enum class IntPacking { kGptq, kAwq, kCompressedTensors, kBnbInt8 };

struct PackedIntegers {
  IntPacking packing = IntPacking::kGptq;
  std::string scheme;  // as reports and errors name it: "GPTQ v1", "AWQ GEMM", "compressed-tensors pack-quantized"
  int bits = 4;
  uint64_t n = 0, k = 0;
  uint64_t group = 0;   // columns a group holds (k: one group a row)
  uint64_t groups = 0;  // scale columns (GPTQ / AWQ: scale rows)
  // GPTQ v1 stores zero - 1. At 2, 4 and 8 bits the tools subtract one from every field of a
  // word at once (word - 0x55555555 / 0x11111111 / 0x01010101, mod 2^32), so a zero of 0
  // borrows from the field above it, and the loader adds the same constant back to the whole
  // word before unpacking; at 3 bits each field is (zero - 1) & 7 and comes back as
  // (field + 1) & 7. gptq_v1 says which: the zero is then unpacked that way.
  bool gptq_v1 = false;
  // Without a zero-point companion, every group's zero (compressed-tensors' symmetric codes
  // are stored offset by 2^(bits-1)).
  int32_t implicit_zero = 0;
  DType scale_dtype = DType::kF16;
  float post_factor = 1.0f;  // LLM.int8: the FP32 1/127 bitsandbytes multiplies by after SCB
  SnapshotTensor codes, scales, zeros, g_idx;  // zeros, g_idx: .tensor null where absent
  // Short text for reports: "GPTQ v1 int4 g128".
  std::string describe() const;
};

// Rows [r0, r1) unpacked: scratch.codes [rows, k] the codes as stored (unsigned), .zeros
// [rows, groups] each group's zero point (the implicit one where none is stored), .scales
// [rows, groups] the scales widened to FP32. The weight is ((code - zero) * scale) * post_factor.
Status unpack_packed_rows(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& scratch);
// Only scratch.zeros of the same.
Status unpack_packed_zeros(const PackedIntegers& p, uint64_t r0, uint64_t r1, DecodeScratch& scratch);
// The scales as stored, as [n, groups] in p.scale_dtype (GPTQ's and AWQ's [groups, n] transposed).
Result<std::vector<uint8_t>> packed_scale_bytes(const PackedIntegers& p);
// The group of each column: g_idx's (checked to be groups), else k / group.
Result<std::vector<uint32_t>> packed_group_of(const PackedIntegers& p);

// The decoder of a packed-integer source tensor (its `packed` set).
Result<std::unique_ptr<SourceDecoder>> make_packed_integer_decoder(const SourceTensor& source);

// What the semantic checks of a packed-integer tensor may accept (GroupingOptions carries them).
struct PackedIntegerAllowances {
  bool suspect_scales = false;  // zero or non-finite group scales
  bool g_idx_mismatch = false;  // a g_idx that is not each group's whole share of columns, or contradicts desc_act
  bool zero_convention = false;  // GPTQ zeros that contradict the checkpoint_format the config declares
  bool fused_scale_mismatch = false;  // NVFP4 projections fused by engines (q/k/v, gate/up) with different global scales
};

// Reads the tensor's scales, zero points and g_idx (never its codes: they are 8-32x larger)
// and checks what the tool's config and layout promise about them: finite, nonzero scales;
// a g_idx of groups in range, each group holding its share of columns (and k / group where
// the config says the columns are in order); for GPTQ, zero points that follow the declared
// checkpoint_format's convention where the config says they are symmetric. Each finding an
// error naming the file, the tensor and what is wrong, unless allowed.
Status check_packed_integers(const PackedIntegers& p, bool columns_in_order, bool symmetric, const PackedIntegerAllowances& allow);

}  // namespace iris
