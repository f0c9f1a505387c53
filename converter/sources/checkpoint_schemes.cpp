#include "converter/sources/checkpoint_schemes.h"

#include "converter/sources/schemes/scheme_helpers.h"

namespace iris {

namespace {

// Schemes recognised and refused by name (their companions say which; no decoder yet).
const CheckpointScheme kLlmInt8{"bitsandbytes LLM.int8 (int8 weights with SCB row scales)", {}, {".SCB", ".weight_format"}};
const CheckpointScheme kModelOptNvfp4{"ModelOpt NVFP4 (weight_scale_2)", {}, {".weight_scale_2"}};
const CheckpointScheme kCtNvfp4{"compressed-tensors nvfp4-pack-quantized (weight_global_scale)", {}, {".weight_global_scale"}};

// Packed integers before FP8: compressed-tensors' P.weight_scale belongs to P.weight_packed.
const CheckpointScheme* const kSchemes[] = {&schemes::kGptOssMxfp4, &schemes::kBitsandbytes4bit, &schemes::kCompressedTensorsPacked,
                                            &schemes::kGptqAwq,     &schemes::kFp8Scaled,        &kLlmInt8,
                                            &kModelOptNvfp4,        &kCtNvfp4};

}  // namespace

std::span<const CheckpointScheme* const> checkpoint_schemes() { return kSchemes; }

std::string undecoded_scheme_of(const Snapshot& snap, const std::string& name) {
  // A packed weight with a global scale is compressed-tensors NVFP4, not integers.
  if (name.ends_with(".weight_packed") && snap.find(name.substr(0, name.size() - 14) + ".weight_global_scale"))
    return "compressed-tensors nvfp4-pack-quantized (weight_packed)";
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
