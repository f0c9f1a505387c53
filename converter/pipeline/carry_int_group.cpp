#include "converter/pipeline/carry_int_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "converter/pipeline/producers.h"
#include "converter/sources/source_decoder.h"
#include "quant/int_group.h"

namespace iris {

Result<std::optional<IntGroupCarry>> plan_int_group_carry(const SourceTensor& st, uint64_t tile_n, uint64_t tile_k) {
  if (!st.packed) return internal_error("tensor '" + st.desc.name + "' is not packed integers");
  const PackedIntegers& p = *st.packed;
  const uint32_t half = 1u << (p.bits - 1);

  // The stored column order: columns by group (stable), so that group g is stored columns
  // [g * group, (g + 1) * group). Without a g_idx, or with one in column order, no permutation.
  IRIS_ASSIGN_OR_RETURN(std::vector<uint32_t> group_of, packed_group_of(p));
  std::vector<uint32_t> perm(p.k);
  std::iota(perm.begin(), perm.end(), 0u);
  std::stable_sort(perm.begin(), perm.end(), [&](uint32_t a, uint32_t b) { return group_of[a] < group_of[b]; });
  bool act_order = false;
  for (uint64_t j = 0; j < p.k; ++j) {
    if (group_of[perm[j]] != j / p.group) return std::optional<IntGroupCarry>();  // not whole runs: decoded instead
    act_order |= perm[j] != j;
  }

  // Zero points: one u8 a group; none where every group's is the symmetric 2^(bits-1). Only
  // decided here (a pass over the zero points, kept nowhere): the components are made when the
  // tensor's turn comes, so that planning a model holds none of its side tables.
  bool symmetric = true;
  {
    DecodeScratch scratch;
    constexpr uint64_t kRowsAtOnce = 4096;
    for (uint64_t r0 = 0; r0 < p.n; r0 += kRowsAtOnce) {
      const uint64_t r1 = std::min(p.n, r0 + kRowsAtOnce);
      IRIS_TRY(unpack_packed_zeros(p, r0, r1, scratch));
      for (int32_t z : scratch.zeros) {
        if (z < 0 || z > 255) return std::optional<IntGroupCarry>();
        symmetric &= uint32_t(z) == half;
      }
    }
  }

  IntGroupCarry c;
  TensorDesc& d = c.desc;
  d.name = st.desc.name;
  d.shape = st.desc.shape;
  d.dtype = st.desc.dtype;
  d.format = Format::kIntGroup;
  d.params = {{"bits", p.bits}, {"group_size", p.group}, {"scale_dtype", std::string(dtype_archive_name(p.scale_dtype))},
              {"zero_points", !symmetric}, {"act_order", act_order}};
  if (p.post_factor != 1.0f) d.params["post_factor"] = double(p.post_factor);  // LLM.int8's 1/127 (FORMAT.md 4.5)
  d.layout = choose_layout(d, tile_n, tile_k);
  IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(d));

  // Codes: rows unpacked from the checkpoint, placed in stored column order, packed at `bits`.
  auto source = st.packed;
  auto perm_shared = std::make_shared<std::vector<uint32_t>>(std::move(perm));
  auto row_scratch = std::make_shared<DecodeScratch>();
  const uint64_t row_bytes = g.row_bytes();
  RowBytesReader read = [source, perm_shared, row_scratch, row_bytes](uint64_t at, uint64_t n, uint8_t* out) -> Status {
    const PackedIntegers& q = *source;
    const uint64_t r0 = at / row_bytes, r1 = r0 + n / row_bytes;
    IRIS_TRY(unpack_packed_rows(q, r0, r1, *row_scratch));
    std::fill(out, out + n, uint8_t(0));
    const std::vector<uint32_t>& order = *perm_shared;
    for (uint64_t r = 0; r < r1 - r0; ++r) {
      const uint8_t* codes = row_scratch->codes.data() + r * q.k;
      uint8_t* row = out + r * row_bytes;
      for (uint64_t j = 0; j < q.k; ++j) quant::int_group_put_code(row, uint32_t(q.bits), j, codes[order[j]]);
    }
    return Status::ok();
  };
  c.producers.push_back(tile_producer(std::move(read), g, d.layout));
  c.producers.push_back([source](ByteSink& sink) -> Status {
    IRIS_ASSIGN_OR_RETURN(std::vector<uint8_t> scales, packed_scale_bytes(*source));
    return sink.write({scales.data(), scales.size()});
  });
  if (!symmetric)
    c.producers.push_back([source](ByteSink& sink) -> Status {
      const PackedIntegers& q = *source;
      DecodeScratch scratch;
      std::vector<uint8_t> zeros;
      constexpr uint64_t kRowsAtOnce = 4096;
      for (uint64_t r0 = 0; r0 < q.n; r0 += kRowsAtOnce) {
        const uint64_t r1 = std::min(q.n, r0 + kRowsAtOnce);
        IRIS_TRY(unpack_packed_zeros(q, r0, r1, scratch));
        zeros.assign(scratch.zeros.begin(), scratch.zeros.end());  // each within 0..255: checked when planned
        IRIS_TRY(sink.write({zeros.data(), zeros.size()}));
      }
      return Status::ok();
    });
  if (act_order)
    c.producers.push_back([perm_shared](ByteSink& sink) {
      return sink.write({reinterpret_cast<const uint8_t*>(perm_shared->data()), perm_shared->size() * 4});
    });
  return std::optional<IntGroupCarry>(std::move(c));
}

}  // namespace iris
