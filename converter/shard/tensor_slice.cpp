#include "converter/shard/tensor_slice.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "common/checked_math.h"
#include "formats/format_traits.h"
#include "formats/tile_layout.h"

namespace iris {

namespace {

constexpr uint64_t kFlush = uint64_t(1) << 20;

std::string range_text(uint64_t start, uint64_t count) {
  std::string r = "[";  // (built in steps: GCC 12 warns, wrongly, on the chained + form)
  r += std::to_string(start);
  r += ", ";
  r += std::to_string(start + count);
  r += ")";
  return r;
}

// Gathers scattered runs of bytes and passes them to a sink in blocks of about kFlush.
class Gather {
 public:
  explicit Gather(ByteSink& sink) : sink_(sink) {}
  Status add(const uint8_t* p, uint64_t n) {
    buf_.append(reinterpret_cast<const char*>(p), n);
    return buf_.size() >= kFlush ? flush() : Status::ok();
  }
  Status flush() {
    if (buf_.empty()) return Status::ok();
    Status s = sink_.write({reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()});
    buf_.clear();
    return s;
  }

 private:
  ByteSink& sink_;
  std::string buf_;
};

// Drops [offset, offset + n) of a component's bytes from the process's resident set once read
// (the page cache keeps them): slicing an archive larger than memory stays bounded by the
// largest matrix, as export's reads are (converter/exports/export.cpp).
using Release = std::function<void(uint64_t offset, uint64_t n)>;

Release releaser(const IrisArchive& a, const StoredComponent& c) {
  return [&a, &c](uint64_t offset, uint64_t n) { a.mapping(c).release(a.absolute_offset(c) + offset, n); };
}

// The bytes of a row-major array of `shape` (elements of `elem` bytes) inside `box`, in order.
ComponentProducer box_producer(std::span<const uint8_t> bytes, std::vector<uint64_t> shape, uint64_t elem, Box box, Release release) {
  return [bytes, shape = std::move(shape), elem, box = std::move(box), release = std::move(release)](ByteSink& sink) -> Status {
    const size_t rank = shape.size();
    if (rank == 0) return sink.write(bytes.subspan(0, elem));
    for (uint64_t c : box.count)
      if (c == 0) return Status::ok();
    std::vector<uint64_t> stride(rank, elem);
    for (size_t d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
    const uint64_t run = box.count[rank - 1] * elem;
    std::vector<uint64_t> at(rank - 1, 0);  // odometer over the box's leading dimensions
    Gather out(sink);
    for (;;) {
      uint64_t off = box.start[rank - 1] * elem;
      for (size_t d = 0; d + 1 < rank; ++d) off += (box.start[d] + at[d]) * stride[d];
      IRIS_TRY(out.add(bytes.data() + off, run));
      size_t d = rank - 1;
      while (d > 0) {
        if (++at[d - 1] < box.count[d - 1]) break;
        at[d - 1] = 0;
        --d;
      }
      if (d == 0) break;
    }
    IRIS_TRY(out.flush());
    release(0, bytes.size());
    return Status::ok();
  };
}

// The tiled codes of rows [n0, n0 + dst.n) and packed bytes [k0_bytes, k0_bytes +
// dst.row_bytes()) of matrices [b0, b0 + dst.batch), re-tiled in the destination's tiles.
ComponentProducer tiled_producer(std::span<const uint8_t> codes, MatrixGeometry src, Layout sl, MatrixGeometry dst, Layout dl,
                                 uint64_t b0, uint64_t n0, uint64_t k0_bytes, Release release) {
  return [=](ByteSink& sink) -> Status {
    const uint64_t src_stripe = stripe_bytes(src, sl.tile_n), dst_stripe = stripe_bytes(dst, dl.tile_n);
    const uint64_t src_matrix = src.padded_n * src.padded_row_bytes();
    std::vector<uint8_t> src_rows(sl.tile_n * src.row_bytes()), dst_rows(dl.tile_n * dst.row_bytes()), out(dst_stripe);
    for (uint64_t b = 0; b < dst.batch; ++b) {
      const uint8_t* matrix = codes.data() + (b0 + b) * src_matrix;
      uint64_t cached = UINT64_MAX;  // the source stripe untiled in src_rows
      for (uint64_t row0 = 0; row0 < dst.n; row0 += dl.tile_n) {
        const uint64_t rows = std::min(dl.tile_n, dst.n - row0);
        for (uint64_t r = 0; r < rows; ++r) {
          const uint64_t sr = n0 + row0 + r, stripe = sr / sl.tile_n;
          if (stripe != cached) {
            untile_stripe(src, sl.tile_n, sl.tile_k, matrix + stripe * src_stripe, stripe * sl.tile_n, src_rows.data());
            cached = stripe;
          }
          std::memcpy(dst_rows.data() + r * dst.row_bytes(), src_rows.data() + (sr % sl.tile_n) * src.row_bytes() + k0_bytes,
                      dst.row_bytes());
        }
        tile_stripe(dst, dl.tile_n, dl.tile_k, dst_rows.data(), row0, out.data());
        IRIS_TRY(sink.write(out));
      }
      release((b0 + b) * src_matrix, src_matrix);
    }
    return Status::ok();
  };
}

// A cut along a dimension of `extent` elements at [start, start + count) falls on `unit`
// boundaries (the end of the dimension counts as one).
bool on_units(uint64_t start, uint64_t count, uint64_t extent, uint64_t unit) {
  return unit <= 1 || (start % unit == 0 && (count % unit == 0 || start + count == extent));
}

// NF4/FP4 absmax of the box, in the box's own block order, and (double quantization) its
// nested absmax, after checking that the box's blocks form whole nested groups.
ComponentProducer gather_absmax(std::span<const uint8_t> absmax, uint64_t elem, std::vector<uint64_t> blocks, Release release) {
  return [absmax, elem, blocks = std::move(blocks), release = std::move(release)](ByteSink& sink) -> Status {
    Gather out(sink);
    for (uint64_t b : blocks) IRIS_TRY(out.add(absmax.data() + b * elem, elem));
    IRIS_TRY(out.flush());
    release(0, absmax.size());
    return Status::ok();
  };
}

}  // namespace

Result<CutUnits> cut_units(const TensorDesc& d) {
  CutUnits u;
  if (d.format == Format::kRaw) return u;
  const uint64_t packing = format_traits(d.format).row_unit;  // packing unit of a row
  uint64_t block = format_block_size(d);
  if (d.format == Format::kFp8E4M3) {
    IRIS_ASSIGN_OR_RETURN(Fp8Params p, fp8_params(d));
    if (p.granularity == ScaleGranularity::kBlock) {
      u.rows = p.block_n;
      block = p.block_k;
    } else if (p.granularity == ScaleGranularity::kGroup) {
      block = p.group_size;
    }
  }
  if (d.format == Format::kIntGroup) {
    // Groups of columns; one group a row (channel scales) is cut anywhere on whole bytes,
    // each part keeping its row's scale.
    IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(d));
    block = p.group_size >= d.shape.back() ? 1 : p.group_size;
  }
  u.columns = std::max<uint64_t>(block, packing);
  return u;
}

Result<SlicedTensor> slice_tensor(const IrisArchive& a, const ArchiveTensor& t, const Box& box) {
  const auto& shape = t.desc.shape;
  const size_t rank = shape.size();
  if (box.start.size() != rank || box.count.size() != rank) return internal_error(tensor_context(t.desc) + "a box of another rank");
  for (size_t d = 0; d < rank; ++d)
    if (box.start[d] > shape[d] || box.count[d] > shape[d] - box.start[d])
      return internal_error(tensor_context(t.desc) + "a box outside the tensor");
  SlicedTensor out;
  out.desc = t.desc;
  out.desc.shape = box.count;
  const ComponentBytes bytes = a.component_bytes(t);
  auto comp = [&](Role r) { return bytes[static_cast<int>(r)]; };
  auto freed = [&](Role r) -> Release {
    const StoredComponent* c = t.component(r);
    return c ? releaser(a, *c) : Release([](uint64_t, uint64_t) {});
  };
  if (box.covers(shape)) {  // whole: the components as they are, in windows let go once written
    for (const auto& c : t.components) {
      auto b = a.bytes(c);
      out.producers.push_back([b, release = releaser(a, c)](ByteSink& sink) -> Status {
        for (uint64_t pos = 0; pos < b.size(); pos += kFlush * 16) {
          const uint64_t n = std::min<uint64_t>(kFlush * 16, b.size() - pos);
          IRIS_TRY(sink.write(b.subspan(pos, n)));
          release(pos, n);
        }
        return Status::ok();
      });
    }
    return out;
  }
  // Stacks are cut along their first dimension only; the dimensions between it and the matrix
  // are whole, so that a range of the first is a range of the flattened stack.
  for (size_t d = 1; d + 2 < rank; ++d)
    if (box.start[d] != 0 || box.count[d] != shape[d])
      return invalid_input(tensor_context(t.desc) + "only the first dimension of a stack and its rows and columns can be split");

  if (t.desc.format == Format::kRaw) {
    const uint32_t bits = dtype_bits(t.desc.dtype);
    if (bits % 8 != 0) return invalid_input(tensor_context(t.desc) + storage_name(t.desc) + " is packed below a byte and cannot be split");
    out.producers.push_back(box_producer(comp(Role::kData), shape, bits / 8, box, freed(Role::kData)));
    return out;
  }
  if (rank < 2 || t.desc.layout.kind != LayoutKind::kTiled)
    return invalid_input(tensor_context(t.desc) + storage_name(t.desc) + " stored flat (its blocks cross rows) cannot be split; only whole");
  IRIS_ASSIGN_OR_RETURN(const MatrixGeometry src, matrix_geometry(t.desc));
  const uint64_t inner = src.batch / std::max<uint64_t>(rank > 2 ? shape[0] : 1, 1);  // matrices per step of dim 0
  const uint64_t b0 = rank > 2 ? box.start[0] * inner : 0;
  const uint64_t n0 = box.start[rank - 2], n = box.count[rank - 2];
  const uint64_t k0 = box.start[rank - 1], k = box.count[rank - 1];
  IRIS_ASSIGN_OR_RETURN(const CutUnits units, cut_units(t.desc));
  if (!on_units(n0, n, src.n, units.rows))
    return invalid_input(tensor_context(t.desc) + "rows " + range_text(n0, n) + " cut its " + std::to_string(units.rows) + "-row scale blocks");
  if (!on_units(k0, k, src.k, units.columns))
    return invalid_input(tensor_context(t.desc) + "columns " + range_text(k0, k) + " cut its " + std::to_string(units.columns) + "-column " +
                         (format_block_size(t.desc) > 1 ? "quantization blocks" : "packing units"));
  // The box's descriptor: the source's tiles, narrowed as the converter narrows them.
  out.desc.layout = choose_layout(out.desc, t.desc.layout.tile_n, t.desc.layout.tile_k);
  if (t.desc.format == Format::kNf4 || t.desc.format == Format::kBnbFp4) out.desc.params["quant_state_bytes"] = 0;  // the source's state described the whole tensor
  nlohmann::json fp8_scale_shape;
  IRIS_ASSIGN_OR_RETURN(const MatrixGeometry dst, matrix_geometry(out.desc));
  const uint64_t k0_bytes = k0 * src.code_bits / 8;
  const uint64_t B = src.batch, e = dst.batch;
  std::vector<ComponentProducer> producers;
  producers.push_back(tiled_producer(comp(Role::kCodes), src, t.desc.layout, dst, out.desc.layout, b0, n0, k0_bytes, freed(Role::kCodes)));

  switch (t.desc.format) {
    case Format::kMxfp4: {
      const uint64_t kb = ceil_div(src.k, 32);
      producers.push_back(box_producer(comp(Role::kScales), {B, src.n, kb}, 1, Box{{b0, n0, k0 / 32}, {e, n, ceil_div(k, 32)}}, freed(Role::kScales)));
      break;
    }
    case Format::kNvfp4: {
      // The E4M3 block scales' box, and each matrix's tensor scale whole (a box of rows or
      // columns keeps its matrix's global scale); its stored shape: the box's leading
      // dimensions, or the source's own form for one matrix ([] or [1]).
      IRIS_ASSIGN_OR_RETURN(Nvfp4Params p, nvfp4_params(t.desc));
      const uint64_t kb = ceil_div(src.k, 16);
      producers.push_back(box_producer(comp(Role::kScales), {B, src.n, kb}, 1, Box{{b0, n0, k0 / 16}, {e, n, ceil_div(k, 16)}}, freed(Role::kScales)));
      producers.push_back(box_producer(comp(Role::kTensorScale), {B, 1, 1}, 4, Box{{b0, 0, 0}, {e, 1, 1}}, freed(Role::kTensorScale)));
      out.desc.params["tensor_scale_shape"] = rank > 2 ? std::vector<uint64_t>(box.count.begin(), box.count.end() - 2) : p.tensor_scale_shape;
      break;
    }
    case Format::kFp8E4M3: {
      IRIS_ASSIGN_OR_RETURN(Fp8Params p, fp8_params(t.desc));
      const uint64_t es = dtype_bits(p.scale_dtype) / 8;
      std::vector<uint64_t> sshape, start, count;
      switch (p.granularity) {
        case ScaleGranularity::kTensor: sshape = {B, 1, 1}, start = {b0, 0, 0}, count = {e, 1, 1}; break;
        case ScaleGranularity::kChannel: sshape = {B, src.n, 1}, start = {b0, n0, 0}, count = {e, n, 1}; break;
        case ScaleGranularity::kBlock:
          sshape = {B, ceil_div(src.n, p.block_n), ceil_div(src.k, p.block_k)};
          start = {b0, n0 / p.block_n, k0 / p.block_k};
          count = {e, ceil_div(n, p.block_n), ceil_div(k, p.block_k)};
          break;
        case ScaleGranularity::kGroup:
          sshape = {B, src.n, ceil_div(src.k, p.group_size)};
          start = {b0, n0, k0 / p.group_size};
          count = {e, n, ceil_div(k, p.group_size)};
          break;
      }
      // The stored scale shape keeps its form: the box's leading dimensions, then what the
      // source had after them (trailing 1s as they were).
      std::vector<uint64_t> ss = p.scale_shape, lead(box.count.begin(), box.count.end() - 2);
      std::vector<uint64_t> want = lead;
      want.push_back(count[1]);
      want.push_back(count[2]);
      if (ss.size() == want.size()) ss = want;
      else if (ss.size() + 1 == want.size() && count[2] == 1) ss = {want.begin(), want.end() - 1};
      else if (!(ss.empty() && e * count[1] * count[2] == 1)) ss = {e * count[1] * count[2]};
      out.desc.params["scale_shape"] = ss;
      producers.push_back(box_producer(comp(Role::kScales), sshape, es, Box{start, count}, freed(Role::kScales)));
      break;
    }
    case Format::kNf4:
    case Format::kBnbFp4: {
      IRIS_ASSIGN_OR_RETURN(Bnb4Params p, bnb4_params(t.desc));
      const uint64_t per_row = src.k / p.block_size;  // tiled: K is a multiple of the block
      if (k0 % p.block_size != 0 || k % p.block_size != 0)
        return invalid_input(tensor_context(t.desc) + "columns " + range_text(k0, k) + " cut its " + std::to_string(p.block_size) + "-element blocks");
      std::vector<uint64_t> blocks;
      blocks.reserve(e * n * (k / p.block_size));
      for (uint64_t b = 0; b < e; ++b)
        for (uint64_t r = 0; r < n; ++r)
          for (uint64_t j = 0; j < k / p.block_size; ++j) blocks.push_back(((b0 + b) * src.n + n0 + r) * per_row + k0 / p.block_size + j);
      const uint64_t total_blocks = ceil_div(src.batch * src.n * src.k, p.block_size);
      std::vector<uint64_t> groups;
      if (p.double_quant) {
        // Each nested group of the box must be a whole group of the source, in order (its
        // last may be the source's last, partial one).
        const uint64_t g = p.nested_block_size;
        for (uint64_t i = 0; i < blocks.size(); i += g) {
          const uint64_t len = std::min<uint64_t>(g, blocks.size() - i);
          bool whole = blocks[i] % g == 0 && (len == g || blocks[i] + len == total_blocks);
          for (uint64_t j = 1; whole && j < len; ++j) whole = blocks[i + j] == blocks[i] + j;
          if (!whole)
            return invalid_input(tensor_context(t.desc) + "the box " + range_text(n0, n) + " x " + range_text(k0, k) + " cuts its double-quantization "
                                 "groups of " + std::to_string(g) + " blocks (only whole groups can be split off)");
          groups.push_back(blocks[i] / g);
        }
      }
      producers.push_back(gather_absmax(comp(Role::kAbsmax), p.double_quant ? 1 : 4, blocks, freed(Role::kAbsmax)));
      if (p.double_quant) producers.push_back(gather_absmax(comp(Role::kNestedAbsmax), 4, groups, freed(Role::kNestedAbsmax)));
      auto table = comp(Role::kCodeTable);
      producers.push_back([table](ByteSink& s) { return s.write(table); });
      if (p.double_quant) {
        auto nested = comp(Role::kNestedCodeTable);
        producers.push_back([nested](ByteSink& s) { return s.write(nested); });
      }
      break;
    }
    case Format::kIntGroup: {
      // Scales and zero points: the box of [B, N, G]; the permutation: each kept matrix's
      // whole. Act-order's permutation scatters a run of stored columns over the logical ones,
      // so such a tensor is cut by rows (and matrices) only.
      IRIS_ASSIGN_OR_RETURN(IntGroupParams p, int_group_params(t.desc));
      if (p.act_order && k != src.k)
        return invalid_input(tensor_context(t.desc) + "columns " + range_text(k0, k) + ": its act-order permutation scatters stored columns "
                             "over the logical ones, so it can be cut by rows only");
      const uint64_t groups = ceil_div(src.k, p.group_size);
      const Box gbox{{b0, n0, k0 / p.group_size}, {e, n, ceil_div(k, p.group_size)}};
      producers.push_back(box_producer(comp(Role::kScales), {B, src.n, groups}, dtype_bits(p.scale_dtype) / 8, gbox, freed(Role::kScales)));
      if (p.zero_points) producers.push_back(box_producer(comp(Role::kZeroPoints), {B, src.n, groups}, 1, gbox, freed(Role::kZeroPoints)));
      if (p.act_order)
        producers.push_back(box_producer(comp(Role::kPermutation), {B, src.k}, 4, Box{{b0, 0}, {e, src.k}}, freed(Role::kPermutation)));
      break;
    }
    default:
      return invalid_input(tensor_context(t.desc) + storage_name(t.desc) + " cannot be split");
  }
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(out.desc));
  if (specs.size() != producers.size()) return internal_error(tensor_context(t.desc) + "slice components do not match its descriptor");
  out.producers = std::move(producers);
  return out;
}

}  // namespace iris
