#include "converter/convert.h"

#include <chrono>
#include <filesystem>

#include "converter/producers.h"
#include "converter/progress.h"
#include "formats/snapshot.h"
#include "formats/source_tensors.h"

#ifndef IRIS_VERSION
#define IRIS_VERSION "dev"
#endif

namespace iris {

using nlohmann::json;

json ConvertReport::to_json() const {
  return {{"file_bytes", written.file_bytes}, {"data_bytes", written.data_bytes}, {"source_bytes", source_bytes},
          {"tensors", tensors}, {"quantized_tensors", quantized_tensors}, {"warnings", warnings}, {"seconds", seconds}};
}

namespace {

// One producer per component, taking each from the source part of the same role.
Result<std::vector<ComponentProducer>> producers_for(const SourceTensor& st, const TensorDesc& desc) {
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(desc));
  std::vector<ComponentProducer> out;
  for (const auto& spec : specs) {
    const SourcePart* part = st.part(spec.role);
    if (!part) return internal_error("tensor '" + desc.name + "': no source for component '" + spec.role + "'");
    const auto& file = part->ref.file->mapping();
    const auto& t = *part->ref.tensor;
    if (spec.role == "codes" && desc.layout.kind == LayoutKind::kTiled) {
      IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(desc));
      if (g.batch * g.n * g.row_bytes() != t.size)
        return invalid_input(part->ref.file->path() + ": tensor '" + t.name + "': " + std::to_string(t.size) +
                             " bytes do not hold the codes of shape " + json(desc.shape).dump());
      out.push_back(tile_producer(file, t.offset, g, desc.layout));
    } else {
      if (spec.bytes != t.size)
        return invalid_input(part->ref.file->path() + ": tensor '" + t.name + "': holds " + std::to_string(t.size) +
                             " bytes, component '" + spec.role + "' needs " + std::to_string(spec.bytes));
      out.push_back(copy_producer(file, t.offset, t.size));
    }
  }
  return out;
}

}  // namespace

Result<ConvertReport> run_convert(const ConvertOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.tile_n == 0 || o.tile_k == 0 || o.tile_k % 64 != 0)
    return usage_error("--tile-n must be > 0 and --tile-k a positive multiple of 64");
  IRIS_ASSIGN_OR_RETURN(Snapshot snap, Snapshot::open(o.source));
  IRIS_ASSIGN_OR_RETURN(std::vector<SourceTensor> sources, group_source_tensors(snap));

  ConvertReport report;
  report.warnings = snap.warnings();
  report.source_bytes = snap.total_tensor_bytes();
  IrisWriter writer;
  writer.set_model_type(snap.config().model_type);
  writer.set_tool({{"name", "iris"}, {"version", IRIS_VERSION}});
  json files = json::array();
  for (const auto& sh : snap.shards())
    files.push_back({{"name", std::filesystem::path(sh->path()).filename().string()}, {"bytes", sh->file_size()}});
  writer.set_provenance({{"source", o.source},
                         {"resolved", snap.resolved_from()},
                         {"source_files", files},
                         {"options", {{"quant", "keep"}, {"tile_n", o.tile_n}, {"tile_k", o.tile_k}}}});
  for (auto& st : sources) {
    TensorDesc desc = st.desc;
    desc.layout = choose_layout(desc, o.tile_n, o.tile_k);
    IRIS_ASSIGN_OR_RETURN(auto producers, producers_for(st, desc));
    if (is_quantized(desc.format)) ++report.quantized_tensors;
    writer.add_tensor(desc, st.source_json(), std::move(producers));
    ++report.tensors;
  }
  for (const auto& f : snap.aux_files()) writer.add_file(f.name, f.bytes);

  ProgressBar bar("convert", o.show_progress);
  WriteOptions wo;
  wo.overwrite = o.overwrite;
  wo.progress = [&](uint64_t done, uint64_t total) { bar.update(done, total); };
  IRIS_ASSIGN_OR_RETURN(report.written, writer.write(o.output, wo));
  bar.finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace iris
