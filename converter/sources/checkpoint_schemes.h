// Every quantized checkpoint scheme iris reads or recognises, each described in one place, as
// formats/format_traits.h describes the archive's formats: the quant_method values that
// declare it, the tensor names that start one of its groups and how a group becomes one logical
// tensor (its companions, dtypes and shapes checked), what its companions say when met alone,
// and whether iris decodes it. sources/source_tensors.cpp groups a snapshot by this table;
// sources/quant_scheme.cpp checks a declared scheme against it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "converter/sources/source_tensors.h"

namespace iris {

struct CheckpointScheme {
  const char* name;  // as errors name it, e.g. "bitsandbytes 4-bit"
  // quantization_config.quant_method values that declare it (none: only its tensors tell).
  std::vector<const char*> quant_methods;
  // Name endings only this scheme's companions have: how a checkpoint without a config is
  // recognised (a lone safetensors file).
  std::vector<const char*> companion_suffixes;
  bool decoded = false;  // false: recognised only, and refused by name
  // Decoded schemes. The logical weight whose group a tensor named `name` starts, "" when it
  // starts none; the group, checked, as one logical tensor (its codes part first).
  std::string (*group_of)(const Snapshot& snap, const std::string& name) = nullptr;
  Result<SourceTensor> (*group)(const Snapshot& snap, const SnapshotTensor& first, const std::string& weight,
                                const GroupingOptions& options) = nullptr;
  // A tensor no group claimed: an error when it is one of this scheme's companions alone.
  Status (*check_unclaimed)(const Snapshot& snap, const SnapshotTensor& t, const GroupingOptions& options) = nullptr;
};

std::span<const CheckpointScheme* const> checkpoint_schemes();

// The scheme a tensor's companions reveal when it is one iris does not decode ("" otherwise).
std::string undecoded_scheme_of(const Snapshot& snap, const std::string& name);

namespace schemes {
// Each decoded scheme (sources/schemes/*.cpp).
// compressed-tensors mxfp4-pack-quantized, the U8 codes of the pack-quantized scheme's group.
Result<SourceTensor> compressed_tensors_mxfp4_group(const Snapshot& snap, const SnapshotTensor& packed, const std::string& weight,
                                                    const GroupingOptions& options);
extern const CheckpointScheme kGptOssMxfp4, kBitsandbytes4bit, kBitsandbytesInt8, kFp8Scaled, kGptqAwq, kCompressedTensorsPacked, kNvfp4Packed;
}  // namespace schemes

}  // namespace iris
