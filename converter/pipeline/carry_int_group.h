// A GPTQ, AWQ or compressed-tensors weight carried into the archive without loss, as an
// int_group tensor (formats/FORMAT.md 4.5): its codes repacked into the archive's order and
// tiled, its scales and zero points as [N, groups], and, where act-order permutes its columns,
// the permutation that makes each group a contiguous run of columns.
#pragma once

#include <optional>
#include <vector>

#include "common/status.h"
#include "converter/sources/source_tensors.h"
#include "formats/iris_writer.h"

namespace iris {

struct IntGroupCarry {
  TensorDesc desc;
  std::vector<ComponentProducer> producers;
};

// The carry of `st` (st.packed set) with the given tiles, or nullopt where int_group cannot
// hold it as stored: a g_idx whose groups are not whole runs of group_size columns once
// ordered (accepted by --allow-g-idx-mismatch), or a zero point past 255. Reads the small
// companions (scales, zero points, g_idx) to decide; the codes are read when written.
Result<std::optional<IntGroupCarry>> plan_int_group_carry(const SourceTensor& st, uint64_t tile_n, uint64_t tile_k);

}  // namespace iris
