#include "converter/pipeline/carry_int_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "converter/pipeline/producers.h"
#include "converter/sources/source_decoder.h"
#include "quant/int_group.h"

namespace iris {

namespace {

// A producer of bytes made whole in memory (the small components).
ComponentProducer bytes_producer(std::shared_ptr<const std::vector<uint8_t>> bytes) {
  return [bytes](ByteSink& sink) { return sink.write({bytes->data(), bytes->size()}); };
}

}  // namespace

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

  // Zero points: one u8 a group; none where every group's is the symmetric 2^(bits-1).
  DecodeScratch scratch;
  auto zeros = std::make_shared<std::vector<uint8_t>>(p.n * p.groups);
  bool symmetric = true;
  constexpr uint64_t kRowsAtOnce = 4096;
  for (uint64_t r0 = 0; r0 < p.n; r0 += kRowsAtOnce) {
    const uint64_t r1 = std::min(p.n, r0 + kRowsAtOnce);
    IRIS_TRY(unpack_packed_zeros(p, r0, r1, scratch));
    for (uint64_t i = 0; i < (r1 - r0) * p.groups; ++i) {
      const int32_t z = scratch.zeros[i];
      if (z < 0 || z > 255) return std::optional<IntGroupCarry>();
      (*zeros)[r0 * p.groups + i] = uint8_t(z);
      symmetric &= uint32_t(z) == half;
    }
  }
  IRIS_ASSIGN_OR_RETURN(std::vector<uint8_t> scales, packed_scale_bytes(p));

  IntGroupCarry c;
  TensorDesc& d = c.desc;
  d.name = st.desc.name;
  d.shape = st.desc.shape;
  d.dtype = st.desc.dtype;
  d.format = Format::kIntGroup;
  d.params = {{"bits", p.bits}, {"group_size", p.group}, {"scale_dtype", std::string(dtype_archive_name(p.scale_dtype))},
              {"zero_points", !symmetric}, {"act_order", act_order}};
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
  c.producers.push_back(bytes_producer(std::make_shared<const std::vector<uint8_t>>(std::move(scales))));
  if (!symmetric) c.producers.push_back(bytes_producer(zeros));
  if (act_order) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(p.k * 4);
    std::memcpy(bytes->data(), perm_shared->data(), bytes->size());
    c.producers.push_back(bytes_producer(bytes));
  }
  return std::optional<IntGroupCarry>(std::move(c));
}

}  // namespace iris
