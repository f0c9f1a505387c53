#include "verify/value_checks.h"

#include <unordered_map>

#include "formats/fused_projections.h"

#include <cmath>
#include <cstring>
#include <numeric>
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

// Scales that are floats: NaN or infinite ones are errors (every value they scale is lost);
// negative and zero ones are well defined (weight = code x scale, as the producing tools and
// the reference decoders compute) but rarely meant, so they pass with a warning and a count
// that `--strict` turns into a failure.
struct ScaleCounts {
  uint64_t nonfinite = 0, negative = 0, zero = 0;
  void add(float v) {
    nonfinite += !std::isfinite(v);
    negative += v < 0;
    zero += v == 0;
  }
};

std::string scale_warning(const ScaleCounts& n, const char* what, bool zero_is_normal) {
  std::string w;
  if (n.negative) w = std::to_string(n.negative) + " " + what + " negative";
  if (n.zero && !zero_is_normal) w += (w.empty() ? std::to_string(n.zero) + " " + what : " and " + std::to_string(n.zero)) + " zero";
  return w.empty() ? w : w + " (decoded as code x scale; --strict fails on them)";
}

ScaleCounts count_f32(std::span<const uint8_t> bytes) {
  ScaleCounts n;
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    float v;
    std::memcpy(&v, bytes.data() + i, 4);
    n.add(v);
  }
  return n;
}

// The counts of scales stored as `dtype` (F32, BF16 or F16).
ScaleCounts count_scales(std::span<const uint8_t> s, DType dtype) {
  if (dtype == DType::kF32) return count_f32(s);
  ScaleCounts n;
  for (size_t i = 0; i + 2 <= s.size(); i += 2) {
    uint16_t h;
    std::memcpy(&h, s.data() + i, 2);
    n.add(dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h));
  }
  return n;
}

CheckResult scales_check(const ArchiveTensor& t, const ComponentBytes& c) {
  auto role = [&](Role r) { return c[static_cast<int>(r)]; };
  auto fail = [](const std::string& what) { return CheckResult{"values:scales", false, what}; };
  auto pass = [](std::string warning) { return CheckResult{"values:scales", true, "", std::move(warning)}; };
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
      // A zero absmax is an all-zero block, which bitsandbytes writes for zero weights.
      const char* what = p->double_quant ? "nested absmax values are" : "absmax values are";
      const ScaleCounts n = count_f32(role(p->double_quant ? Role::kNestedAbsmax : Role::kAbsmax));
      if (n.nonfinite) return fail(std::to_string(n.nonfinite) + " " + what + " NaN or infinite");
      return pass(scale_warning(n, what, true));
    }
    case Format::kFp8E4M3: {
      auto p = fp8_params(t.desc);
      if (!p.is_ok()) return fail(p.status().message());
      const ScaleCounts n = count_scales(role(Role::kScales), p->scale_dtype);
      if (n.nonfinite) return fail(std::to_string(n.nonfinite) + " FP8 scales are NaN or infinite");
      return pass(scale_warning(n, "FP8 scales are", false));
    }
    case Format::kIntGroup: {
      auto p = int_group_params(t.desc);
      if (!p.is_ok()) return fail(p.status().message());
      const ScaleCounts n = count_scales(role(Role::kScales), p->scale_dtype);
      if (n.nonfinite) return fail(std::to_string(n.nonfinite) + " group scales are NaN or infinite");
      // LLM.int8's scales (the ones with a post factor) are row absmax values: 0 is an
      // all-zero row, which bitsandbytes writes for zero weights.
      const bool absmax = p->post_factor != 1.0f;
      return pass(scale_warning(n, absmax ? "row absmax values (SCB) are" : "group scales are", absmax));
    }
    case Format::kNvfp4: {
      auto p = nvfp4_params(t.desc);
      if (!p.is_ok()) return fail(p.status().message());
      uint64_t nan = 0;
      for (uint8_t b : role(Role::kScales)) nan += (b & 0x7F) == 0x7F;
      if (nan) return fail(std::to_string(nan) + " E4M3 block scales are NaN");
      const ScaleCounts n = count_f32(role(Role::kTensorScale));
      if (n.nonfinite) return fail(std::to_string(n.nonfinite) + " tensor scales are NaN or infinite");
      // A tensor scale that divides must not be 0 (compressed-tensors' weight_global_scale).
      if (p->tensor_scale_divides && n.zero) return fail(std::to_string(n.zero) + " tensor scales are 0 and divide");
      return pass(scale_warning(n, "tensor scales are", false));
    }
    default: break;
  }
  return pass("");
}

CheckResult padding_check(const ArchiveTensor& t, const ComponentBytes& c) {
  auto g = matrix_geometry(t.desc);
  if (!g.is_ok()) return {"values:padding", false, g.status().message()};
  std::span<const uint8_t> codes = c[static_cast<int>(Role::kCodes)];
  const uint64_t tile_n = t.desc.layout.tile_n, tile_k = t.desc.layout.tile_k;
  // Elements of the smallest whole-byte run: 1 at 8 bits, 2 at 4, 4 at 2, 8 at 3 (int_group).
  const uint64_t unit = 8 / std::gcd<uint64_t>(g->code_bits, 8);
  uint64_t bad = 0;
  for (uint64_t b = 0; b < g->batch; ++b)
    for (uint64_t r = 0; r < g->padded_n; ++r) {
      // Padding of row r: all of it past N, else the columns past the stored K.
      const uint64_t c0 = r < g->n ? g->stored_k : 0;
      for (uint64_t col = c0; col < g->padded_k; col += unit) {
        // Runs within one tile row are contiguous: check them a tile row at a time.
        const uint64_t run = std::min(g->padded_k, (col / tile_k + 1) * tile_k) - col;
        const uint64_t off = tiled_byte_offset(*g, tile_n, tile_k, b, r, col);
        const uint64_t nbytes = run * g->code_bits / 8;
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

// NVFP4 projections that engines fuse (q/k/v, gate/up, w1/w3) should share their global
// scales, as both producing tools write them: an engine that fuses them otherwise uses one for
// all (vllm-project/vllm#54974). `convert` refuses such a checkpoint unless asked to keep it;
// here it is a warning on the archive, naming the first pair found.
static void fused_scales_lint(const IrisArchive& a, VerifyReport* report) {
  const auto& tensors = a.manifest().tensors;
  std::unordered_map<std::string, const ArchiveTensor*> nvfp4;
  for (const auto& t : tensors)
    if (t.desc.format == Format::kNvfp4) nvfp4[t.desc.name] = &t;
  if (nvfp4.empty()) return;
  std::string warning;
  uint64_t pairs = 0;
  for (const auto& [name, t] : nvfp4) {
    const auto mine = a.component_bytes(*t)[static_cast<int>(Role::kTensorScale)];
    for (const std::string& sibling : fused_sibling_names(name)) {
      auto it = nvfp4.find(sibling);
      if (it == nvfp4.end() || name > sibling) continue;  // each pair once
      const auto theirs = a.component_bytes(*it->second)[static_cast<int>(Role::kTensorScale)];
      const bool same_convention = t->desc.params.value("tensor_scale", "") == it->second->desc.params.value("tensor_scale", "");
      if (same_convention && mine.size() == theirs.size() && std::equal(mine.begin(), mine.end(), theirs.begin())) continue;
      ++pairs;
      if (warning.empty()) warning = "NVFP4 tensors '" + name + "' and '" + sibling + "' are fused by engines but have different global scales";
    }
  }
  if (pairs > 1) warning += " (and " + std::to_string(pairs - 1) + " more pairs)";
  report->archive.push_back({"lint:fused-scales", true, "", warning});
}

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
  fused_scales_lint(a, report);
}

}  // namespace iris
