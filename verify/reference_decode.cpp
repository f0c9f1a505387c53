#include "verify/reference_decode.h"

#include <cstring>

#include "formats/tile_layout.h"
#include "quant/fp8.h"
#include "quant/mxfp4.h"
#include "quant/nf4.h"

namespace iris {

std::vector<uint8_t> untile_codes(const TensorDesc& d, std::span<const uint8_t> tiled) {
  if (d.layout.kind != LayoutKind::kTiled) return {tiled.begin(), tiled.end()};
  const MatrixGeometry g = matrix_geometry(d).value();
  std::vector<uint8_t> rows(g.batch * g.n * g.row_bytes());
  const uint64_t sb = stripe_bytes(g, d.layout.tile_n);
  for (uint64_t m = 0; m < g.batch; ++m)
    for (uint64_t r = 0; r < g.n; r += d.layout.tile_n)
      untile_stripe(g, d.layout.tile_n, d.layout.tile_k, tiled.data() + m * g.padded_n * g.padded_row_bytes() + (r / d.layout.tile_n) * sb,
                    r, rows.data() + (m * g.n + r) * g.row_bytes());
  return rows;
}

namespace {

template <typename T>
const T* as(const ComponentBytes& c, const char* role) {
  auto it = c.find(role);
  return it == c.end() ? nullptr : reinterpret_cast<const T*>(it->second.data());
}

}  // namespace

quant::Bnb4bitParams bnb4_params(const TensorDesc& d, const ComponentBytes& c) {
  quant::Bnb4bitParams p;
  p.block_size = format_block_size(d);
  p.code_table = as<float>(c, "code_table");
  p.double_quant = nf4_double_quant(d);
  if (p.double_quant) {
    p.absmax_codes = as<uint8_t>(c, "absmax");
    p.nested_absmax = as<float>(c, "nested_absmax");
    p.nested_map = as<float>(c, "nested_code_table");
    p.nested_block_size = d.params.value("nested_block_size", uint64_t(256));
    p.nested_offset = float(d.params.value("nested_offset", 0.0));
  } else {
    p.absmax = as<float>(c, "absmax");
  }
  return p;
}

quant::Fp8Scales fp8_scales(const TensorDesc& d, const void* scales) {
  quant::Fp8Scales s;
  s.data = scales;
  const std::string sd = d.params.value("scale_dtype", "f32");
  s.type = sd == "bf16" ? quant::ScaleType::kBf16 : sd == "f16" ? quant::ScaleType::kF16 : quant::ScaleType::kF32;
  switch (fp8_granularity(d)) {
    case ScaleGranularity::kTensor: s.granularity = quant::Fp8Granularity::kTensor; break;
    case ScaleGranularity::kChannel: s.granularity = quant::Fp8Granularity::kChannel; break;
    case ScaleGranularity::kBlock:
      s.granularity = quant::Fp8Granularity::kBlock;
      s.block_n = d.params.value("block_n", uint64_t(128));
      s.block_k = d.params.value("block_k", uint64_t(128));
      break;
    case ScaleGranularity::kGroup:
      s.granularity = quant::Fp8Granularity::kGroup;
      s.group = d.params.value("group_size", uint64_t(128));
      break;
  }
  return s;
}

Status reference_decode(const TensorDesc& d, const ComponentBytes& c, float* out) {
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(d));
  for (const auto& s : specs) {
    auto it = c.find(s.role);
    if (it == c.end() || it->second.size() != s.bytes)
      return invalid_input("tensor '" + d.name + "': component '" + s.role + "' missing or of the wrong size");
  }
  uint64_t numel = 1;
  for (auto s : d.shape) numel *= s;
  if (numel == 0) return Status::ok();
  const std::vector<uint8_t> rows = untile_codes(d, c.at("codes"));
  const uint64_t k = d.shape.back();
  switch (d.format) {
    case Format::kMxfp4:
      quant::mxfp4_decode(rows.data(), as<uint8_t>(c, "scales"), numel / k, k, out);
      return Status::ok();
    case Format::kNf4:
    case Format::kBnbFp4:
      quant::bnb4_decode(rows.data(), numel, bnb4_params(d, c), out);
      return Status::ok();
    case Format::kFp8E4M3: {
      const uint64_t n = d.shape[d.shape.size() - 2];
      quant::fp8_decode(rows.data(), numel / (n * k), n, k, fp8_scales(d, c.at("scales").data()), out);
      return Status::ok();
    }
    case Format::kRaw: break;
  }
  return unsupported("tensor '" + d.name + "': not a quantized format");
}

}  // namespace iris
