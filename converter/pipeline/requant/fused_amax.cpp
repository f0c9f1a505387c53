#include "converter/pipeline/requant/fused_amax.h"

#include <algorithm>
#include <cmath>

#include "formats/fused_projections.h"
#include "converter/sources/source_decoder.h"

namespace iris {

Result<std::vector<float>> FusedAmax::own(const std::string& name) {
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  const SourceTensor& t = *tensors_.at(name);
  IRIS_ASSIGN_OR_RETURN(auto decoder, SourceDecoder::create(t));
  const uint64_t k = decoder->k(), rows = decoder->rows();
  const uint64_t n = t.desc.shape.size() >= 2 ? t.desc.shape[t.desc.shape.size() - 2] : 1;
  std::vector<float> amax(n ? rows / n : 0, 0.f);
  const uint64_t step = std::max<uint64_t>(1, (uint64_t(1) << 18) / std::max<uint64_t>(k, 1));
  std::vector<float> x;
  DecodeScratch scratch;
  for (uint64_t r0 = 0; r0 < rows; r0 += step) {
    const uint64_t r1 = std::min(rows, r0 + step);
    x.resize((r1 - r0) * k);
    IRIS_TRY(decoder->decode_rows(r0, r1, x.data(), scratch));
    for (uint64_t r = r0; r < r1; ++r) {
      float a = amax[r / n];
      const float* v = x.data() + (r - r0) * k;
      for (uint64_t i = 0; i < k; ++i)
        if (std::isfinite(v[i])) a = std::max(a, std::fabs(v[i]));
      amax[r / n] = a;
    }
  }
  return cache_[name] = amax;
}

Result<std::vector<float>> FusedAmax::amax(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tensors_.count(name)) return internal_error("tensor '" + name + "': not planned for NVFP4");
  IRIS_ASSIGN_OR_RETURN(std::vector<float> out, own(name));
  const auto& shape = tensors_.at(name)->desc.shape;
  for (const std::string& s : fused_sibling_names(name)) {
    auto it = tensors_.find(s);
    if (it == tensors_.end() || it->second->desc.shape.size() != shape.size() ||
        !std::equal(shape.begin(), shape.end() - 2, it->second->desc.shape.begin()))
      continue;
    IRIS_ASSIGN_OR_RETURN(std::vector<float> other, own(s));
    for (size_t m = 0; m < out.size(); ++m) out[m] = std::max(out[m], other[m]);
  }
  return out;
}

}  // namespace iris
