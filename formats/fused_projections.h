// Projections that read the same input and that engines fuse into one GEMM (q/k/v, gate/up,
// an expert's w1/w3), named as transformers' models name them. NVFP4 gives such siblings one
// global scale (ModelOpt's export and llm-compressor both do), so that the fused GEMM has one:
// the converter's NVFP4 encoder gives them one, and its NVFP4 reader and the verifier check it.
#pragma once

#include <string>
#include <vector>

namespace iris {

// The names of `name`'s fused siblings (itself excluded): each dot-separated segment of `name`
// that is one of q_proj/k_proj/v_proj, gate_proj/up_proj, w1/w3 or wq/wk/wv, replaced by the
// group's others.
std::vector<std::string> fused_sibling_names(const std::string& name);

}  // namespace iris
