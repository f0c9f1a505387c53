// A box of an archive tensor -- a range of its leading (stack) dimension, of its rows and of
// its columns -- as a tensor of its own, losslessly: the same codes, scales and absmax values,
// re-tiled for the smaller shape (FORMAT.md section 11). A box that would cut a quantization
// block, a block-scale tile or an NF4 double-quantization group is refused, naming the tensor:
// a slice is never requantized.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "formats/byte_sink.h"
#include "formats/iris_archive.h"

namespace iris {

// Per dimension of the logical shape: [start, start + count).
struct Box {
  std::vector<uint64_t> start, count;
  static Box whole(const std::vector<uint64_t>& shape) { return {std::vector<uint64_t>(shape.size(), 0), shape}; }
  bool covers(const std::vector<uint64_t>& shape) const { return start == std::vector<uint64_t>(shape.size(), 0) && count == shape; }
};

struct SlicedTensor {
  TensorDesc desc;  // the box's shape; the source's format, parameters and tiles (narrowed to fit)
  std::vector<ComponentProducer> producers;  // one per component of component_specs(desc)
};

// The units a cut of a tiled matrix (or stack) must fall on so that slice_tensor can take it,
// in elements: along its rows, FP8 block scales' block_n; along its columns, its quantization
// block (MXFP4 32, NF4/FP4 block_size, FP8 block_k or group_size) or its packing unit; 1 for
// raw tensors. NF4 double-quantization groups are not a unit of either dimension alone:
// slice_tensor still checks them, box by box.
struct CutUnits {
  uint64_t rows = 1, columns = 1;
};
Result<CutUnits> cut_units(const TensorDesc& d);

// `a` and `t` must outlive the producers. Only the first dimension of a stack (rank >= 3) and
// the last two (rows and columns) may be cut; other dimensions must be whole.
Result<SlicedTensor> slice_tensor(const IrisArchive& a, const ArchiveTensor& t, const Box& box);

}  // namespace iris
