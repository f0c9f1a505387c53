// `iris export --dtype keep` of an int_group tensor: the checkpoint tensors it was carried
// from (GPTQ v1 / v2, AWQ GEMM, compressed-tensors pack-quantized), rebuilt byte for byte from
// the archive's codes, scales, zero points and permutation and its source record.
#pragma once

#include <vector>

#include "common/status.h"
#include "converter/sources/safetensors_writer.h"
#include "formats/iris_archive.h"

namespace iris {

Status int_group_source_entries(const IrisArchive& a, const ArchiveTensor& t, std::vector<SafetensorsEntry>* out);

}  // namespace iris
