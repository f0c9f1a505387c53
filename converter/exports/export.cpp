#include "converter/exports/export.h"
#include "converter/sources/archive_snapshot.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "common/checked_math.h"
#include "common/float_bits.h"
#include "converter/exports/export_folder.h"
#include "converter/exports/export_int_group.h"
#include "converter/exports/export_v1.h"
#include "converter/pipeline/output_guard.h"
#include "formats/iris_archive.h"
#include "converter/sources/safetensors_writer.h"
#include "formats/tile_layout.h"
#include "formats/tensor_decode.h"

namespace iris {

namespace {

// Export hashes what it reads: a tensor's components are checked against the manifest
// (verify_tensor) just before its first bytes are decoded or copied -- from the page cache, so
// the file is read once -- and a mismatch fails the export with the verify error; the output
// is then never committed.
ComponentProducer checked(const IrisArchive& a, const ArchiveTensor& t, ComponentProducer inner) {
  return [&a, &t, inner = std::move(inner)](ByteSink& sink) -> Status {
    if (Status s = a.verify_tensor(t); !s.is_ok()) return verify_failed(s.message() + "; nothing written");
    return inner(sink);
  };
}

constexpr uint64_t kChunk = 16ull << 20;


ComponentProducer copy_component(const IrisArchive& a, const StoredComponent& c) {
  return [&a, &c](ByteSink& sink) -> Status {
    auto bytes = a.bytes(c);
    for (uint64_t pos = 0; pos < bytes.size(); pos += kChunk) {
      uint64_t n = std::min<uint64_t>(kChunk, bytes.size() - pos);
      IRIS_TRY(sink.write(bytes.subspan(pos, n)));
      a.mapping(c).release(a.absolute_offset(c) + pos, n);
    }
    return Status::ok();
  };
}

// Row-major codes again, exactly as the source checkpoint packed them.
ComponentProducer untile_component(const IrisArchive& a, const StoredComponent& c, MatrixGeometry g, Layout l) {
  return [&a, &c, g, l](ByteSink& sink) -> Status {
    auto tiled = a.bytes(c);
    const uint64_t sb = stripe_bytes(g, l.tile_n);
    std::vector<uint8_t> rows(l.tile_n * g.row_bytes());
    for (uint64_t b = 0; b < g.batch; ++b)
      for (uint64_t r = 0; r < g.n; r += l.tile_n) {
        const uint8_t* stripe = tiled.data() + b * g.padded_n * g.padded_row_bytes() + (r / l.tile_n) * sb;
        untile_stripe(g, l.tile_n, l.tile_k, stripe, r, rows.data());
        IRIS_TRY(sink.write({rows.data(), std::min(l.tile_n, g.n - r) * g.row_bytes()}));
      }
    return Status::ok();
  };
}

// A tensor decoded by the CPU reference (formats/tensor_decode.h: the same code as the C API's
// iris_dequantize_rows) and rounded once to `to`, a bounded number of rows at a time: quantized
// tensors, and raw float tensors converted to another float type.
ComponentProducer dequantize_component(const IrisArchive& a, const ArchiveTensor& t, DType to) {
  return [&a, &t, to](ByteSink& sink) -> Status {
    const ComponentBytes comps = a.component_bytes(t);
    const RowView v = row_view(t.desc);
    const uint64_t es = dtype_bits(to) / 8;
    const uint64_t step = std::max<uint64_t>(1, kChunk / std::max<uint64_t>(v.k * es, 1));
    std::vector<uint8_t> out(std::min(step, v.rows) * v.k * es);
    for (uint64_t r = 0; r < v.rows; r += step) {
      const uint64_t r1 = std::min(v.rows, r + step);
      IRIS_TRY(decode_rows(t.desc, comps, r, r1, to, out.data()).with_context(a.path() + ": "));
      IRIS_TRY(sink.write({out.data(), (r1 - r) * v.k * es}));
    }
    return Status::ok();
  };
}

// The companion tensors a quantized tensor was converted from, rebuilt from its components.
Status source_entries(const IrisArchive& a, const ArchiveTensor& t, std::vector<SafetensorsEntry>* out) {
  const std::string ctx = a.path() + ": tensor '" + t.desc.name + "': ";
  if (t.desc.format == Format::kIntGroup) return int_group_source_entries(a, t, out);
  const nlohmann::json source = t.source.json();
  auto parts = source.find("tensors");
  if (parts == source.end() || !parts->is_array() || parts->empty())
    return unsupported(ctx + "has no source record, so it cannot be exported in its original form");
  for (const auto& p : *parts) {
    std::string role = p.value("role", ""), name = p.value("name", ""), dt = p.value("dtype", "");
    auto parsed_role = role_from_name(role);
    const StoredComponent* c = parsed_role ? t.component(*parsed_role) : nullptr;
    auto dtype = dtype_from_safetensors(dt);
    if (!c || !dtype || name.empty() || !p.contains("shape"))
      return invalid_input(ctx + "source record for role '" + role + "' is incomplete");
    std::vector<uint64_t> shape = p["shape"].get<std::vector<uint64_t>>();
    auto need = dtype_bytes(*dtype, checked_numel(shape).value_or(0));
    ComponentProducer prod;
    if (*parsed_role == Role::kCodes && t.desc.layout.kind == LayoutKind::kTiled) {
      IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(t.desc));
      if (!need || *need != g.batch * g.n * g.row_bytes()) return invalid_input(ctx + "source shape of '" + name + "' disagrees with the codes");
      prod = untile_component(a, *c, g, t.desc.layout);
    } else {
      if (!need || *need != c->spec.bytes) return invalid_input(ctx + "source shape of '" + name + "' disagrees with component '" + role + "'");
      prod = copy_component(a, *c);
    }
    if (&p == &parts->front()) prod = checked(a, t, std::move(prod));  // once per tensor
    out->push_back({name, *dtype, shape, std::move(prod)});
  }
  return Status::ok();
}

}  // namespace

Result<std::optional<DType>> export_dtype(const std::string& name) {
  if (name == "bf16") return std::optional<DType>(DType::kBF16);
  if (name == "f16") return std::optional<DType>(DType::kF16);
  if (name == "f32") return std::optional<DType>(DType::kF32);
  if (name == "keep") return std::optional<DType>();
  return usage_error("--dtype must be keep, bf16, f16 or f32, not '" + name + "'");
}

Result<std::vector<SafetensorsEntry>> export_entries(const IrisArchive& a, std::optional<DType> target) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& t : a.manifest().tensors) {
    if (is_quantized(t.desc.format)) {
      if (target) {
        entries.push_back({t.desc.name, *target, t.desc.shape, checked(a, t, dequantize_component(a, t, *target))});
        continue;
      }
      IRIS_TRY(source_entries(a, t, &entries));
      continue;
    }
    const StoredComponent& c = t.components[0];
    if (target && is_float_dtype(t.desc.dtype) && t.desc.dtype != *target)
      entries.push_back({t.desc.name, *target, t.desc.shape, checked(a, t, dequantize_component(a, t, *target))});
    else
      entries.push_back({t.desc.name, t.desc.dtype, t.desc.shape, checked(a, t, copy_component(a, c))});
  }
  return entries;
}

Result<ExportReport> run_export(const ExportOptions& o) {
  if (o.format == "iris-v1") return run_export_v1(o);
  {
    std::error_code ec;
    if (o.output.ends_with('/') || std::filesystem::is_directory(o.output, ec)) return run_export_folder(o);
  }
  if (o.format != "safetensors") return usage_error("--format must be safetensors or iris-v1, not '" + o.format + "'");
  IRIS_ASSIGN_OR_RETURN(const std::optional<DType> target, export_dtype(o.dtype));
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(o.archive));
  IRIS_ASSIGN_OR_RETURN(std::vector<SafetensorsEntry> entries, export_entries(a, target));
  ExportReport r;
  r.tensors = entries.size();
  IRIS_TRY(refuse_input_as_output(o.output, {o.archive}, "output"));
  SafetensorsWriteOptions wo;
  wo.overwrite = o.overwrite;
  wo.metadata = recorded_safetensors_metadata(a);
  wo.partial_files = o.partial_files;
  wo.progress = [&](uint64_t d, uint64_t total) {
    r.bytes = total;
    if (o.progress) o.progress(d, total);
  };
  IRIS_TRY(write_safetensors(o.output, std::move(entries), wo));
  return r;
}

}  // namespace iris
