// The two things iris compares weights between -- an .iris archive and a Hugging Face
// snapshot (folder, file or repo id) -- behind one interface: tensor names, shapes, the
// storage format, and rows decoded to FP32. `verify --against` and `iris diff` are built on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/iris_archive.h"
#include "formats/tensor_desc.h"

namespace iris {

class WeightSet {
 public:
  virtual ~WeightSet() = default;
  // Opens SRC: an .iris archive if it is one, else a snapshot.
  static Result<std::unique_ptr<WeightSet>> open(const std::string& src);
  // An archive already open (verify reuses the one it checked).
  static std::unique_ptr<WeightSet> from_archive(IrisArchive archive);

  virtual const std::string& path() const = 0;
  virtual const std::vector<TensorDesc>& tensors() const = 0;  // logical descriptors, source order
  // FP32 values of rows [r0, r1) of tensor `i` (rows x K, K the last dimension).
  virtual Status decode_rows(size_t i, uint64_t r0, uint64_t r1, float* out) const = 0;
  // Whether tensor `i` decodes to FP32 exactly (unquantized float tensors, and every format
  // iris reads: the decoders are exact); false for integer tensors that are not weights.
  virtual bool decodable(size_t i) const = 0;
};


}  // namespace iris
