// The amax behind an NVFP4 tensor's global scale (quant/nvfp4.h: t = amax / 2688). ModelOpt's
// export gives the projections that read the same input -- q/k/v, gate/up, an expert's w1/w3
// -- one weight amax, the largest of theirs (export/quant_utils.py preprocess_linear_fusion),
// so that an engine can fuse them into one GEMM with one global scale. `convert --quant
// nvfp4` does the same: each tensor's amax per matrix of its stack is found once (a pass over
// its values, cached), and a tensor's global scale comes from the largest among its siblings
// that are also converted to NVFP4.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "converter/sources/source_tensors.h"

namespace iris {

class FusedAmax {
 public:
  // A tensor converted to NVFP4 (it must outlive this object).
  void add(const SourceTensor* t) { tensors_[t->desc.name] = t; }
  // Per matrix of `name`'s stack: max |w| over it and its added siblings of the same stack
  // shape. Non-finite values are left out (the encoder refuses them, or with --allow-nonfinite
  // saturates them).
  Result<std::vector<float>> amax(const std::string& name);

 private:
  Result<std::vector<float>> own(const std::string& name);
  std::mutex mu_;
  std::unordered_map<std::string, const SourceTensor*> tensors_;
  std::unordered_map<std::string, std::vector<float>> cache_;
};

}  // namespace iris
