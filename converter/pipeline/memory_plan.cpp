#include "converter/pipeline/memory_plan.h"

#include <algorithm>

#include "common/checked_math.h"
#include "converter/pipeline/requantize.h"
#include "formats/dtype.h"
#include "formats/iris_writer.h"

namespace iris {

namespace {

// Bits per element of a tensor as its source stores it (codes only; side tables separately).
double source_bits(const TensorDesc& d) {
  switch (d.format) {
    case Format::kRaw: return dtype_bits(d.dtype);
    case Format::kMxfp4: return 4.25;
    case Format::kNf4:
    case Format::kBnbFp4: return 4.125;
    case Format::kFp8E4M3: return 8;
    case Format::kIntGroup: return 4.25;  // (the usual width; 2- to 8-bit codes, plus scales)
    case Format::kNvfp4: return 4.5;
  }
  return 32;
}

// Bits per element of the target's codes.
double target_bits(Target t) {
  switch (t) {
    case Target::kMxfp4:
    case Target::kNvfp4:
    case Target::kNf4: return 4;
    case Target::kFp8Tensor:
    case Target::kFp8Channel:
    case Target::kFp8Block: return 8;
    default: return 16;
  }
}

struct TensorNeed {
  uint64_t x = 0, back = 0, codes = 0, read = 0;  // chunk buffers (the maxima persist)
  uint64_t transient = 0;                         // freed when the tensor is written
};

TensorNeed need_of(const PlannedTensor& p, uint64_t chunk_floats, uint64_t tile_n) {
  const TensorDesc& d = p.source->desc;
  const uint64_t numel = checked_numel(d.shape).value_or(0), k = d.shape.empty() ? 1 : std::max<uint64_t>(d.shape.back(), 1);
  const uint64_t n = d.shape.size() >= 2 ? d.shape[d.shape.size() - 2] : 1;
  const uint64_t rows = std::min(requant_chunk_rows(tile_n, k, chunk_floats), std::max<uint64_t>(n, 1));
  const uint64_t cf = std::min(numel, rows * k);
  TensorNeed t;
  t.x = cf * 4;
  t.back = std::max<uint64_t>(cf, p.target == Target::kNf4 ? 64 * 256 : 0) * 4;
  t.codes = uint64_t(double(cf) * target_bits(p.target) / 8) * 2;  // row-major, then tiled
  t.read = uint64_t(double(cf) * source_bits(d) / 8);
  switch (p.target) {
    case Target::kMxfp4: t.transient += numel / 32; break;                               // E8M0 scales
    case Target::kNf4: t.transient += numel / 16 + numel / 64 + numel / 4096 + 64 * 256 * 5; break;  // absmax, codes, nested, carry
    case Target::kFp8Channel: t.transient += numel / k * 4; break;  // one scale per row
    case Target::kFp8Block: t.transient += numel / (128 * 128) * 4 + 4096; break;
    default: break;
  }
  // A quantized source's tables read whole: FP8 scales, NF4 code books.
  for (const auto& part : p.source->parts)
    if (part.role == Role::kScales && d.format == Format::kFp8E4M3) t.transient += part.ref.tensor->size;
  return t;
}

}  // namespace

MemoryPlan predict_memory(const std::vector<PlannedTensor>& tensors, uint64_t chunk_floats, uint64_t tile_n, int workers) {
  workers = std::max(workers, 1);
  TensorNeed most;
  bool requantized = false, big_copy = false;
  for (const auto& p : tensors) {
    if (!p.requantized) {
      uint64_t bytes = 0;
      for (const auto& part : p.source->parts) bytes += part.ref.tensor->size;
      big_copy = big_copy || bytes >= kOverlappedCopyMinBytes;
      continue;
    }
    requantized = true;
    const TensorNeed t = need_of(p, chunk_floats, tile_n);
    // A tensor of fewer chunks than workers keeps only that many busy; each worker's buffers
    // grow to the largest chunk it ever takes, so count every worker at the largest chunk.
    most.x = std::max(most.x, t.x);
    most.back = std::max(most.back, t.back);
    most.codes = std::max(most.codes, t.codes);
    most.read = std::max(most.read, t.read);
    most.transient = std::max(most.transient, t.transient);
  }
  const uint64_t per_worker = most.x + most.back + most.codes + most.read;
  // Large copies beside requantized tensors get a second stream (formats/iris_writer.h).
  const uint64_t copy_stream = requantized && big_copy ? kOverlappedCopyStreamBytes : 0;
  return {chunk_floats, workers, kBaseRssBytes + uint64_t(workers) * per_worker + most.transient + copy_stream};
}

MemoryPlan fit_memory(const std::vector<PlannedTensor>& tensors, uint64_t preferred, uint64_t tile_n, int workers, uint64_t max_rss) {
  MemoryPlan plan = predict_memory(tensors, preferred, tile_n, workers);
  for (int w = std::max(workers, 1); w >= 1 && max_rss && plan.peak_bytes > max_rss; --w)
    for (uint64_t cf = preferred; cf >= kMinChunkFloats; cf /= 2) {
      plan = predict_memory(tensors, cf, tile_n, w);
      if (plan.peak_bytes <= max_rss) break;
    }
  return plan;
}

}  // namespace iris
