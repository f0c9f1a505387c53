#include "converter/sources/checkpoint_schemes.h"

#include "converter/sources/schemes/scheme_helpers.h"

namespace iris {

namespace {

// Packed integers and NVFP4 before FP8: their P.weight_scale is theirs.
const CheckpointScheme* const kSchemes[] = {&schemes::kGptOssMxfp4, &schemes::kBitsandbytes4bit, &schemes::kCompressedTensorsPacked,
                                            &schemes::kNvfp4Packed, &schemes::kGptqAwq,          &schemes::kFp8Scaled,
                                            &schemes::kBitsandbytesInt8};

}  // namespace

std::span<const CheckpointScheme* const> checkpoint_schemes() { return kSchemes; }

std::string undecoded_scheme_of(const Snapshot& /*snap: by names alone now*/, const std::string& name) {
  for (const auto* s : checkpoint_schemes()) {
    if (s->decoded) continue;
    for (const char* suffix : s->companion_suffixes)
      if (name.ends_with(suffix)) return s->name;
  }
  return "";
}

namespace schemes {

std::string quant_method(const Snapshot& snap) {
  const nlohmann::json& qc = snap.config().quantization_config;
  if (!qc.is_object()) return "";
  auto m = qc.find("quant_method");
  return m != qc.end() && m->is_string() ? m->get<std::string>() : "";
}

}  // namespace schemes

}  // namespace iris
