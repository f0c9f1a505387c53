// compressed-tensors mxfp4-pack-quantized (FORMATS.md 7.1): P.weight_packed U8 [N, K/2] (E2M1
// codes, the low nibble the even element) + P.weight_scale U8 [N, K/32] (E8M0 exponents) ->
// P.weight, the mxfp4 archive format as stored. The tool decodes each weight as
// e2m1 * 2^(e - 127) in BF16 (MXFP4PackedCompressor.decompress: decompress_mx_scale, then one
// BF16 multiply), which is exact, as the archive's FP32 decode is: the two agree for every
// exponent but 255, which the tool makes infinity and OCP's E8M0 (the archive's) NaN -- so a
// scale of 255 is refused unless allowed. The integer variant of the same packing is
// compressed_tensors_packed.cpp's, which hands U8 codes here.
#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/schemes/scheme_helpers.h"

namespace iris::schemes {

Result<SourceTensor> compressed_tensors_mxfp4_group(const Snapshot& snap, const SnapshotTensor& packed, const std::string& weight,
                                                    const GroupingOptions& options) {
  const std::string base = weight.substr(0, weight.size() - 7);  // P of P.weight
  const SnapshotTensor* scale = snap.find(base + ".weight_scale");
  if (!scale) return invalid_input(where(packed) + "MXFP4 codes without their '" + base + ".weight_scale' companion");
  if (const SnapshotTensor* zero = snap.find(base + ".weight_zero_point"))
    return unsupported(where(*zero) + "an MXFP4 zero point: iris reads compressed-tensors' symmetric MXFP4 only");
  const auto& w = *packed.tensor;
  const auto& s = *scale->tensor;
  if (w.shape.size() != 2 || w.shape[0] == 0 || w.shape[1] == 0)
    return invalid_input(where(packed) + "MXFP4 codes must be a 2-D U8 tensor [N, K/2], not " + shape_str(w.shape));
  const uint64_t n = w.shape[0], k = w.shape[1] * 2;
  if (k % 32)
    return invalid_input(where(packed) + "MXFP4 codes of " + std::to_string(k) + " columns: not whole blocks of 32 elements");
  if ((s.dtype != DType::kU8 && s.dtype != DType::kF8_E8M0) || s.shape != std::vector<uint64_t>{n, k / 32})
    return invalid_input(where(*scale) + "MXFP4 scales must be U8 [" + std::to_string(n) + ", " + std::to_string(k / 32) +
                         "] (an E8M0 exponent a block of 32), not " + std::string(dtype_st_name(s.dtype)) + " " + shape_str(s.shape));
  if (!options.packed.suspect_scales) {
    const auto bytes = scale->file->data(s);
    for (uint64_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] == 0xFF)
        return invalid_input(where(*scale) + "the scale of output row " + std::to_string(i / (k / 32)) + ", block " + std::to_string(i % (k / 32)) +
                             " is 255, which compressed-tensors decodes as infinity and OCP E8M0 as NaN (allow suspect scales explicitly to "
                             "keep it, decoded as NaN)");
  }
  SourceTensor t;
  t.desc.name = weight;
  t.desc.shape = {n, k};
  t.desc.dtype = logical_float_dtype(snap);
  t.desc.format = Format::kMxfp4;
  t.desc.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  t.parts = {{Role::kCodes, packed}, {Role::kScales, *scale}};
  return t;
}

}  // namespace iris::schemes
