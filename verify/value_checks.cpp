#include "verify/value_checks.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/float_bits.h"
#include "formats/format_traits.h"
#include "formats/tensor_decode.h"
#include "formats/tile_layout.h"

namespace iris {

namespace {

constexpr uint64_t kChunkValues = 1u << 22;

CheckResult finite_check(const ArchiveTensor& t, const ComponentBytes& comps) {
  const RowView v = row_view(t.desc);
  const uint64_t step = std::max<uint64_t>(1, kChunkValues / std::max<uint64_t>(v.k, 1));
  std::vector<float> out;
  uint64_t bad = 0, first = 0;
  for (uint64_t r0 = 0; r0 < v.rows; r0 += step) {
    const uint64_t r1 = std::min(v.rows, r0 + step);
    out.resize((r1 - r0) * v.k);
    Status s = decode_rows(t.desc, comps, r0, r1, DType::kF32, out.data());
    if (!s.is_ok()) return {"values:finite", false, s.message()};
    for (uint64_t i = 0; i < out.size(); ++i)
      if (!std::isfinite(out[i]) && bad++ == 0) first = r0 * v.k + i;
  }
  if (!bad) return {"values:finite", true, ""};
  return {"values:finite", false, std::to_string(bad) + " decoded values are NaN or infinite (the first at flat index " + std::to_string(first) + ")"};
}

template <typename T>
uint64_t count_if_span(std::span<const uint8_t> bytes, bool (*bad)(T)) {
  uint64_t n = 0;
  for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, bytes.data() + i, sizeof(T));
    n += bad(v);
  }
  return n;
}

CheckResult scales_check(const ArchiveTensor& t, const ComponentBytes& c) {
  auto role = [&](Role r) { return c[static_cast<int>(r)]; };
  auto fail = [](const std::string& what) { return CheckResult{"values:scales", false, what}; };
  switch (t.desc.format) {
    case Format::kMxfp4: {
      uint64_t nan = 0;
      for (uint8_t b : role(Role::kScales)) nan += b == 0xFF;
      if (nan) return fail(std::to_string(nan) + " E8M0 scales are 0xFF (NaN)");
      break;
    }
    case Format::kNf4:
    case Format::kBnbFp4: {
      auto p = bnb4_params(t.desc);
      if (!p.is_ok()) return fail(p.status().message());
      auto bad_f32 = +[](float v) { return !std::isfinite(v) || v < 0; };
      if (!p->double_quant) {
        if (uint64_t n = count_if_span<float>(role(Role::kAbsmax), bad_f32)) return fail(std::to_string(n) + " absmax values are negative or not finite");
      } else if (uint64_t n = count_if_span<float>(role(Role::kNestedAbsmax), bad_f32)) {
        return fail(std::to_string(n) + " nested absmax values are negative or not finite");
      }
      break;
    }
    case Format::kFp8E4M3: {
      auto p = fp8_params(t.desc);
      if (!p.is_ok()) return fail(p.status().message());
      std::span<const uint8_t> s = role(Role::kScales);
      std::vector<float> v(s.size() / (p->scale_dtype == DType::kF32 ? 4 : 2));
      for (size_t i = 0; i < v.size(); ++i) {
        if (p->scale_dtype == DType::kF32) {
          std::memcpy(&v[i], s.data() + i * 4, 4);
          continue;
        }
        uint16_t h;
        std::memcpy(&h, s.data() + i * 2, 2);
        v[i] = p->scale_dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      uint64_t bad = 0;
      for (float f : v) bad += !std::isfinite(f) || f <= 0;
      if (bad) return fail(std::to_string(bad) + " FP8 scales are zero, negative or not finite");
      break;
    }
    default: break;
  }
  return {"values:scales", true, ""};
}

CheckResult padding_check(const ArchiveTensor& t, const ComponentBytes& c) {
  auto g = matrix_geometry(t.desc);
  if (!g.is_ok()) return {"values:padding", false, g.status().message()};
  std::span<const uint8_t> codes = c[static_cast<int>(Role::kCodes)];
  const uint64_t tile_n = t.desc.layout.tile_n, tile_k = t.desc.layout.tile_k;
  const uint64_t unit = g->code_bits == 4 ? 2 : 1;  // elements per byte
  uint64_t bad = 0;
  for (uint64_t b = 0; b < g->batch; ++b)
    for (uint64_t r = 0; r < g->padded_n; ++r) {
      // Padding of row r: all of it past N, else the columns past the stored K.
      const uint64_t c0 = r < g->n ? g->stored_k : 0;
      for (uint64_t col = c0; col < g->padded_k; col += unit) {
        // Runs within one tile row are contiguous: check them a tile row at a time.
        const uint64_t run = std::min(g->padded_k, (col / tile_k + 1) * tile_k) - col;
        const uint64_t off = tiled_byte_offset(*g, tile_n, tile_k, b, r, col);
        const uint64_t nbytes = run / unit;
        if (off + nbytes > codes.size()) return {"values:padding", false, "codes shorter than the layout"};
        for (uint64_t i = 0; i < nbytes; ++i) bad += codes[off + i] != g->pad_byte;
        col += run - unit;
      }
    }
  if (!bad) return {"values:padding", true, ""};
  char pad[8];
  std::snprintf(pad, sizeof pad, "0x%02X", g->pad_byte);
  return {"values:padding", false, std::to_string(bad) + " padding bytes are not the zero code " + pad};
}

}  // namespace

void verify_values(const IrisArchive& a, VerifyReport* report) {
  const auto& tensors = a.manifest().tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ArchiveTensor& t = tensors[i];
    if (!is_quantized(t.desc.format)) continue;
    // verify_checksums made one row per tensor, in manifest order.
    if (i >= report->tensors.size() || report->tensors[i].name != t.desc.name) continue;
    TensorReport* row = &report->tensors[i];
    // Values decoded from bytes that fail their checksum would only repeat that failure.
    if (!row->ok()) continue;
    const ComponentBytes comps = a.component_bytes(t);
    row->checks.push_back(finite_check(t, comps));
    row->checks.push_back(scales_check(t, comps));
    if (t.desc.layout.kind == LayoutKind::kTiled) row->checks.push_back(padding_check(t, comps));
  }
}

}  // namespace iris
