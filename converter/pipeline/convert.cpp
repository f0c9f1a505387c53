#include "converter/pipeline/convert.h"

#include "converter/pipeline/carry_int_group.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "common/atomic_output.h"
#include "converter/pipeline/output_guard.h"
#include "converter/pipeline/producers.h"
#include "converter/pipeline/quant_policy.h"
#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "converter/pipeline/memory_plan.h"
#include "converter/pipeline/temp_folder.h"
#include "converter/pipeline/requantize.h"
#include "converter/pipeline/requant/fused_amax.h"
#include "converter/pipeline/resume.h"
#include "converter/shard/shard.h"
#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "converter/sources/tiled_codes.h"
#include "formats/json_text.h"

#ifndef IRIS_VERSION
#define IRIS_VERSION "dev"
#endif

namespace iris {

using nlohmann::json;

OutcomeLayout OutcomeLayout::of(const TensorDesc& d) {
  OutcomeLayout l;
  l.kind = d.layout.kind;
  if (l.kind != LayoutKind::kTiled) return l;
  l.tile_n = d.layout.tile_n;
  l.tile_k = d.layout.tile_k;
  if (auto g = matrix_geometry(d); g.is_ok()) {
    l.padded = true;
    l.padded_n = g->padded_n;
    l.padded_k = g->padded_k;
  }
  return l;
}

json OutcomeLayout::to_json() const {
  json l = {{"kind", layout_kind_name(kind)}};
  if (kind == LayoutKind::kTiled) {
    l["tile_n"] = tile_n;
    l["tile_k"] = tile_k;
    if (padded) {
      l["padded_n"] = padded_n;
      l["padded_k"] = padded_k;
    }
  }
  return l;
}

json ConvertReport::to_json() const {
  json per = json::array();
  for (const auto& o : outcomes) {
    json t = {{"name", o.name}, {"from", o.from}, {"to", o.to}, {"why", o.why}, {"requantized", o.requantized}, {"bytes", o.bytes}};
    if (o.lossy_requant) t["requantized_from_quantized"] = true;
    t["layout"] = o.layout.to_json();
    if (o.quality) t["quality"] = o.quality->to_json();
    per.push_back(std::move(t));
  }
  json j = {{"file_bytes", written.file_bytes}, {"planned_bytes", planned_bytes}, {"data_bytes", written.data_bytes},
          {"predicted_peak_rss_bytes", predicted_peak_rss}, {"chunk_floats", chunk_floats}, {"workers", workers},
          {"source_bytes", source_bytes}, {"tensors", tensors}, {"quantized_tensors", quantized_tensors},
          {"warnings", warnings}, {"seconds", seconds}, {"per_tensor", per}};
  if (dry_run) j["dry_run"] = true;
  if (!written.set_files.empty()) j["set_files"] = set_files_json(written);
  if (shard) j["shard"] = shard->to_json();
  if (resumed_segments) j["resumed_segments"] = resumed_segments;
  if (part.active()) j["part"] = {{"index", part.index}, {"count", part.count}, {"total_tensors", total_tensors}};
  return j;
}

nlohmann::json set_files_json(const WriteSummary& written) {
  json files = json::array();
  for (const auto& [path, bytes] : written.set_files) files.push_back({{"path", path}, {"bytes", bytes}});
  return files;
}

void take_final_sizes(const WriteSummary& written, ConvertReport& report) {
  report.planned_bytes = 0;
  for (size_t i = 0; i < report.outcomes.size() && i < written.tensor_bytes.size(); ++i) {
    report.outcomes[i].bytes = written.tensor_bytes[i];
    report.planned_bytes += written.tensor_bytes[i];
  }
}

Status write_report_file(const std::string& path, const ConvertReport& report, bool overwrite, PartialFileRegistry* registry) {
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile rf, AtomicOutputFile::create(path, overwrite, registry));
  const std::string text = dump_json(report.to_json(), 2) + "\n";
  IRIS_TRY(rf.append({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return rf.commit();
}

namespace {

// One producer per component, taking each from the source part of the same role.
Result<std::vector<ComponentProducer>> producers_for(const SourceTensor& st, const TensorDesc& desc) {
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(desc));
  std::vector<ComponentProducer> out;
  for (const auto& spec : specs) {
    const SourcePart* part = st.part(spec.role);
    if (!part) return internal_error("tensor '" + desc.name + "': no source for component '" + role_name(spec.role) + "'");
    const auto& file = part->ref.file->mapping();
    const auto& t = *part->ref.tensor;
    if (part->tiled) {
      // An archive source's tiled codes: untiled row by row and tiled again (or written
      // row-major), also where the tiles stay the same: the padding is then written afresh,
      // as any other tiles would have it, never carried over from the source (a source whose
      // padding is not the pad byte fails verify; its conversion should not).
      RowBytesReader read = [part, scratch = std::make_shared<TiledScratch>()](uint64_t at, uint64_t n, uint8_t* dst) {
        return read_tiled_codes(*part, at, n, dst, *scratch);
      };
      if (desc.layout.kind == LayoutKind::kTiled) {
        IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(desc));
        out.push_back(tile_producer(std::move(read), g, desc.layout));
      } else {
        out.push_back(stream_producer(std::move(read), spec.bytes));
      }
      continue;
    }
    if (spec.role == Role::kCodes && desc.layout.kind == LayoutKind::kTiled) {
      IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(desc));
      if (g.batch * g.n * g.row_bytes() != t.size)
        return invalid_input(part->ref.file->path() + ": tensor '" + t.name + "': " + std::to_string(t.size) +
                             " bytes do not hold the codes of shape " + json(desc.shape).dump());
      out.push_back(tile_producer(file, t.offset, g, desc.layout));
    } else {
      if (spec.bytes != t.size)
        return invalid_input(part->ref.file->path() + ": tensor '" + t.name + "': holds " + std::to_string(t.size) +
                             " bytes, component '" + role_name(spec.role) + "' needs " + std::to_string(spec.bytes));
      out.push_back(copy_producer(file, t.offset, t.size));
    }
  }
  // An archive source's checksums, checked before its first byte is carried over.
  if (st.check && !out.empty())
    out.front() = [check = st.check, first = std::move(out.front())](ByteSink& sink) -> Status {
      IRIS_TRY(check->run());
      return first(sink);
    };
  return out;
}


// A part run (converter/pipeline/parts.h): the writer keeps the part's tensors and records where they
// belong; the report keeps their outcomes.
// A segment (converter/pipeline/resume.h) gives its own range and place instead of the part's.
Status keep_part(IrisWriter& writer, PartSpec part, const ConvertOptions::Segment& segment, uint64_t plan, ConvertReport& report) {
  PartRecord record;
  record.spec = segment.active ? segment.spec : part;
  record.plan = plan;
  record.total_tensors = report.outcomes.size();
  IRIS_ASSIGN_OR_RETURN(record.manifest_reserve, writer.manifest_reservation());
  std::vector<uint64_t> bytes;
  bytes.reserve(report.outcomes.size());
  for (const auto& out : report.outcomes) bytes.push_back(out.bytes);
  const auto [first, end] = segment.active ? std::pair{segment.first, segment.end} : part_range(bytes, part);
  if (first > end || end > bytes.size()) return internal_error("a segment outside the conversion's tensors");
  record.first_tensor = first;
  record.tensors = end - first;
  writer.keep_tensors(first, end);
  report.part_record = record.to_json();
  writer.set_part(report.part_record);
  IRIS_ASSIGN_OR_RETURN(report.part_file_reserve, writer.manifest_reservation());
  report.outcomes.erase(report.outcomes.begin() + std::ptrdiff_t(end), report.outcomes.end());
  report.outcomes.erase(report.outcomes.begin(), report.outcomes.begin() + std::ptrdiff_t(first));
  report.part = part;
  report.total_tensors = record.total_tensors;
  report.tensors = report.outcomes.size();
  report.quantized_tensors = 0;
  report.planned_bytes = 0;
  for (const auto& out : report.outcomes) {
    report.planned_bytes += out.bytes;
    if (out.layout.kind != LayoutKind::kRowMajor) ++report.quantized_tensors;  // (FORMAT.md: only quantized tensors are tiled or flat)
  }
  return Status::ok();
}

// Neither the archive nor the report may be an input, nor the report the archive.
Status refuse_outputs_over_inputs(const ConvertOptions& o, const std::vector<std::string>& inputs) {
  IRIS_TRY(refuse_input_as_output(o.output, inputs, "output"));
  if (o.report_path.empty()) return Status::ok();
  IRIS_TRY(refuse_input_as_output(o.report_path, inputs, "--report"));
  std::error_code ec;
  if (std::filesystem::absolute(o.report_path, ec) == std::filesystem::absolute(o.output, ec))
    return usage_error("--report '" + o.report_path + "' is the output archive");
  return Status::ok();
}

// A budget in MiB as given, not rounded down to "0 MiB" (one decimal below 100 MiB).
std::string mib_text(uint64_t bytes) {
  char buf[64];
  const double mib = double(bytes) / double(1 << 20);
  std::snprintf(buf, sizeof buf, mib < 100 ? "%.1f MiB (%llu bytes)" : "%.0f MiB", mib, static_cast<unsigned long long>(bytes));
  return buf;
}

// One tensor as the writer takes it: carried over in its format (its codes re-tiled) or
// requantized, with its line of the report.
struct TensorStep {
  TensorDesc desc;
  SourceRecordMaker source_record;  // made when the writer needs it (formats/iris_writer.h)
  std::vector<ComponentProducer> producers;
  ProducerCost cost = ProducerCost::kCompute;
  LateDesc late;
  TensorOutcome outcome;
};

// Whether `st` goes into the archive byte for byte (its codes re-tiled): it is already in the
// target's format, and its bytes are its values' (packed integers are always decoded).
bool carried_as_stored(const SourceTensor& st, Target target) { return !st.packed && already_in_target(st.desc, target); }

// `st` must outlive the writer that takes the step (its producers and record read it).
Result<TensorStep> plan_tensor(const SourceTensor& st, const QuantPolicy::Decision& decision, const ConvertOptions& o,
                               const RequantOptions& ro) {
  TensorStep step;
  TensorOutcome& out = step.outcome;
  out.name = st.desc.name;
  out.from = st.packed ? st.packed->describe() : storage_name(st.desc);
  out.why = decision.why;
  TensorDesc& desc = step.desc;
  std::optional<IntGroupCarry> carry;
  if (st.packed && decision.target == Target::kKeep) {
    IRIS_ASSIGN_OR_RETURN(carry, plan_int_group_carry(st, o.tile_n, o.tile_k));
  }
  if (carry) {
    // GPTQ / AWQ / compressed-tensors integers as stored, in the archive's order.
    desc = std::move(carry->desc);
    step.producers = std::move(carry->producers);
    step.source_record = {[&st] { return st.source_json(); }, [&st](std::string& text, int depth) { st.append_source_text(text, depth); }};
  } else if (carried_as_stored(st, decision.target)) {
    step.cost = ProducerCost::kCopy;
    // Same format: carried over byte for byte, codes re-tiled.
    desc = st.desc;
    desc.layout = choose_layout(desc, o.tile_n, o.tile_k);
    IRIS_ASSIGN_OR_RETURN(step.producers, producers_for(st, desc));
    step.source_record = {[&st] { return st.source_json(); }, [&st](std::string& text, int depth) { st.append_source_text(text, depth); }};
  } else {
    IRIS_ASSIGN_OR_RETURN(RequantPlan plan, plan_requantize(st, decision.target, ro));
    desc = plan.desc;
    step.source_record.make = [record = std::move(plan.source_record)] { return record; };
    step.producers = std::move(plan.producers);
    out.requantized = true;
    out.lossy_requant = (is_quantized(st.desc.format) || st.packed) && is_quantized(desc.format);
    out.quality = plan.quality;
    step.late = plan.late;
  }
  out.to = storage_name(desc);
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(desc));
  for (const auto& c : specs) out.bytes += c.bytes;
  out.layout = OutcomeLayout::of(desc);
  return step;
}

// The planned conversion written: checked against its inputs, then the dry run's plan, the
// archive (or set) and the report, each committed only whole.
Result<ConvertReport> write_outputs(const ConvertOptions& o, const Snapshot& snap, IrisWriter& writer, ConvertReport report,
                                    std::chrono::steady_clock::time_point t0) {
  // Outputs never replace an input, and the report is created (refused if it exists, unless
  // --force) before any archive byte is written.
  std::vector<std::string> inputs;
  for (const auto& sh : snap.shards()) inputs.push_back(sh->path());
  {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(snap.folder(), ec), end; !ec && it != end; it.increment(ec))
      inputs.push_back(it->path().string());
  }
  // A resumable run's probe (converter/pipeline/resume.cpp: the plan, nothing read past the headers)
  // checks the run's output and report here, as the run itself never sees the inputs.
  if (o.plan_only) {
    if (!o.dry_run) IRIS_TRY(refuse_outputs_over_inputs(o, inputs));
    return report;
  }
  if (o.dry_run) {
    // The sizes the real run would write, exactly (formats/iris_writer.h: planned()).
    IRIS_ASSIGN_OR_RETURN(report.written, writer.planned());
    take_final_sizes(report.written, report);
    report.dry_run = true;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.report_path.empty()) {  // the plan, in the shape of the real run's report
      IRIS_TRY(refuse_input_as_output(o.report_path, inputs, "--report"));
      IRIS_TRY(write_report_file(o.report_path, report, o.overwrite, o.partial_files));
    }
    return report;
  }
  IRIS_TRY(refuse_input_as_output(o.output, inputs, "output"));
  IRIS_TRY(AtomicOutputFile::destination(o.output, o.overwrite, /*in_order=*/false).status());  // before the report is opened
  std::optional<AtomicOutputFile> report_file;
  if (!o.report_path.empty()) {
    IRIS_TRY(refuse_outputs_over_inputs(o, inputs));
    IRIS_ASSIGN_OR_RETURN(AtomicOutputFile rf, AtomicOutputFile::create(o.report_path, o.overwrite, o.partial_files));
    report_file = std::move(rf);
  }
  WriteOptions wo;
  wo.overwrite = o.overwrite;
  wo.progress = o.progress;
  wo.partial_files = o.partial_files;
  wo.direct_io = o.direct_io;
  // The report is written in full before the archive gets its name; it is committed after.
  wo.before_commit = [&](const WriteSummary& written) -> Status {
    report.written = written;
    take_final_sizes(written, report);
    if (!report_file) return Status::ok();
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string text = dump_json(report.to_json(), 2) + "\n";
    return report_file->append({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  };
  // A set is identified by the conversion's plan: a merge of parts writes the same set.
  if (o.max_file_size) {
    IRIS_ASSIGN_OR_RETURN(report.written, writer.write_set(o.output, o.max_file_size, report.plan, wo));
  } else {
    IRIS_ASSIGN_OR_RETURN(report.written, writer.write(o.output, wo));
  }
  if (report_file) IRIS_TRY(report_file->commit());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace

// --tp/--ep: the whole conversion into a temporary file beside the ranks, then cut into them.
// The cost: the whole archive is written once more than the ranks, and takes its size in the
// output folder until the ranks are written.
Result<ConvertReport> convert_sharded(const ConvertOptions& o) {
  if (o.part.active() || o.resume || o.max_file_size || o.dry_run)
    return usage_error("--tp/--ep write a folder of rank archives; they do not combine with --part, --resume, --max-file-size or --dry-run");
  std::error_code ec;
  std::filesystem::create_directories(o.output, ec);
  if (ec) return io_error(o.output + ": cannot make the folder: " + ec.message());
  IRIS_ASSIGN_OR_RETURN(TempFolder tmp, TempFolder::beside(std::filesystem::path(o.output) / "whole"));
  ConvertOptions whole = o;
  whole.tp = whole.ep = 1;
  whole.output = (tmp.path() / "whole.iris").string();
  whole.overwrite = false;
  whole.report_path.clear();
  IRIS_ASSIGN_OR_RETURN(ConvertReport report, run_convert(whole));
  ShardOptions so;
  so.archive = whole.output;
  so.output = o.output;
  so.spec = {o.tp, o.ep};
  so.overwrite = o.overwrite;
  so.direct_io = o.direct_io;
  so.partial_files = o.partial_files;
  IRIS_ASSIGN_OR_RETURN(report.shard, run_shard(so));
  for (const auto& name : report.shard->unruled)
    report.warnings.push_back("tensor '" + name + "': no split rule names this matrix: replicated on every rank");
  if (!o.report_path.empty()) IRIS_TRY(write_report_file(o.report_path, report, o.overwrite, o.partial_files));
  return report;
}

Result<ConvertReport> run_convert(const ConvertOptions& o) {
  if (o.tp > 1 || o.ep > 1) return convert_sharded(o);
  if (o.resume && !o.plan_only) return run_convert_resumable(o);
  const auto t0 = std::chrono::steady_clock::now();
  const bool v1 = is_iris_v1_archive(o.source);
  const bool archive = !v1 && is_iris_archive(o.source);
  if (archive && !o.config.empty()) return usage_error("--config applies to .iris v1 sources only (a v2 archive carries its own config.json)");
  if (o.tile_n == 0 || o.tile_k == 0 || o.tile_k % 64 != 0)
    return usage_error("--tile-n must be > 0 and --tile-k a positive multiple of 64");
  if (!v1 && !o.config.empty()) return usage_error("--config applies to .iris v1 sources only (a snapshot carries its own config.json)");
  IRIS_ASSIGN_OR_RETURN(Snapshot snap, v1 ? Snapshot::open_v1(o.source, o.config)
                                          : archive ? Snapshot::open_archive(o.source) : Snapshot::open(o.source));
  IRIS_ASSIGN_OR_RETURN(std::vector<SourceTensor> sources, group_source_tensors(snap, GroupingOptions{o.allow_unscaled_fp8, o.allow_packed}));

  if (o.part.active() && o.dry_run) return usage_error("--part with --dry-run: the plan is the whole conversion's; drop --part");
  if (o.max_file_size && (o.part.active() || o.segment.active))
    return usage_error("--max-file-size with --part: parts are single files; give --max-file-size to iris merge, which writes the set");
  ConvertReport report;
  report.warnings = snap.warnings();
  for (const auto& t : sources)
    if (t.desc.format == Format::kRaw && (t.desc.dtype == DType::kF8_E4M3 || t.desc.dtype == DType::kF8_E5M2))
      report.warnings.push_back("tensor '" + t.desc.name + "': " + std::string(dtype_st_name(t.desc.dtype)) +
                                " without a scale, stored raw (its values are the weights, as asked)");
  report.source_bytes = snap.total_tensor_bytes();
  auto target = target_from_name(o.quant);
  if (!target) return usage_error("--quant '" + o.quant + "': expected mxfp4, nf4, nvfp4, fp8, fp8-channel, fp8-block, bf16 or keep");
  if (o.mxfp4_scale != "ocp" && o.mxfp4_scale != "search") return usage_error("--mxfp4-scale must be ocp or search");
  IRIS_ASSIGN_OR_RETURN(QuantPolicy policy, QuantPolicy::create(*target, o.rules, o.skips, snap.config().skip_modules));
  RequantOptions ro;
  ro.tile_n = o.tile_n;
  ro.tile_k = o.tile_k;
  ro.allow_nonfinite = o.allow_nonfinite;
  ro.mxfp4_rule = o.mxfp4_scale == "search" ? quant::Mxfp4ScaleRule::kSearch : quant::Mxfp4ScaleRule::kOcpFloor;

  // A dry run plans each tensor as it is added and keeps nothing of it (formats/archive_plan.h).
  IrisWriter writer(o.dry_run ? IrisWriter::Mode::kPlan : IrisWriter::Mode::kWrite);
  writer.set_model_type(snap.config().model_type);
  writer.set_tool({{"name", "iris"}, {"version", IRIS_VERSION}});
  json files = json::array();
  for (const auto& sh : snap.shards())
    files.push_back({{"name", std::filesystem::path(sh->path()).filename().string()}, {"bytes", sh->file_size()}});
  // Reproducible: nothing of the machine or of the path typed enters the archive (the same
  // input bytes and options give the same archive bytes anywhere); a repo id is not a path.
  const std::string& resolved = snap.resolved_from();
  const std::string kind = resolved.substr(0, resolved.find(' '));
  json source_ref = {{"kind", kind}};
  if (kind == "repo") source_ref["repo"] = o.source;
  const json provenance = {{"source", source_ref},
                           {"source_files", files},
                           {"safetensors_metadata", snap.safetensors_metadata()},  // for export to write back
                           {"options", {{"quant", o.quant}, {"rules", o.rules}, {"skip", o.skips}, {"mxfp4_scale", o.mxfp4_scale},
                                        {"tile_n", o.tile_n}, {"tile_k", o.tile_k}}}};
  writer.set_provenance(provenance);
  // Every tensor's fate first, so that the memory the run needs is known before anything is
  // decoded (NF4 planning decodes): the chunk size is chosen to fit --max-rss.
  std::vector<QuantPolicy::Decision> decisions;
  std::vector<PlannedTensor> planned;
  decisions.reserve(sources.size());
  planned.reserve(sources.size());
  for (const auto& st : sources) {
    decisions.push_back(policy.decide(st.desc));
    planned.push_back({&st, decisions.back().target, !carried_as_stored(st, decisions.back().target)});
  }
  // A --rule or --skip that matches nothing is reported now, before any tensor is decoded
  // (planning an NF4 target reads its whole source).
  if (!o.allow_unmatched) {
    for (const auto& r : policy.unmatched_rules())
      return usage_error("--rule '" + r + "' matches no tensor (--allow-unmatched to accept)");
    for (const auto& s : policy.unmatched_skips())
      return usage_error("--skip '" + s + "' matches no tensor (--allow-unmatched to accept)");
  }
  const MemoryPlan memory = fit_memory(planned, ro.chunk_floats, o.tile_n, requant_workers(ro), o.max_rss);
  report.predicted_peak_rss = memory.peak_bytes;
  report.chunk_floats = memory.chunk_floats;
  report.workers = memory.workers;
  if (o.max_rss && memory.peak_bytes > o.max_rss)
    return usage_error("this conversion needs about " + std::to_string((memory.peak_bytes + (1 << 20) - 1) >> 20) +
                       " MiB of memory even in the smallest chunks, more than --max-rss " + mib_text(o.max_rss) + " allows (its largest requantized tensor sets it; --dry-run shows the plan)");
  ro.chunk_floats = memory.chunk_floats;
  ro.workers = memory.workers;
  planned = {};
  // NVFP4's global scales: shared by fused siblings, each amax found once (requant/fused_amax.h).
  for (size_t i = 0; i < sources.size(); ++i) {
    if (decisions[i].target != Target::kNvfp4 || carried_as_stored(sources[i], Target::kNvfp4)) continue;
    if (!ro.nvfp4_amax) ro.nvfp4_amax = std::make_shared<FusedAmax>();
    ro.nvfp4_amax->add(&sources[i]);
  }
  report.outcomes.reserve(sources.size());
  // Parts and resumable runs identify the conversion by its plan (converter/pipeline/parts.h).
  std::optional<PlanFingerprint> plan;
  if (o.part.active() || o.plan_only || o.max_file_size) plan.emplace(snap, snap.config().model_type, provenance);
  for (size_t i = 0; i < sources.size(); ++i) {
    IRIS_ASSIGN_OR_RETURN(TensorStep step, plan_tensor(sources[i], decisions[i], o, ro));  // (`sources` outlives the writer)
    report.planned_bytes += step.outcome.bytes;
    if (is_quantized(step.desc.format)) ++report.quantized_tensors;
    if (plan) plan->tensor(step.desc);
    writer.add_tensor(std::move(step.desc), std::move(step.source_record), std::move(step.producers), step.cost, std::move(step.late));
    report.outcomes.push_back(std::move(step.outcome));
    ++report.tensors;
  }
  for (const auto& f : snap.aux_files()) {
    if (plan) plan->file(f.name, f.bytes);
    writer.add_file(f.name, f.bytes);
  }
  if (plan) report.plan = plan->digest();
  if (o.part.active()) IRIS_TRY(keep_part(writer, o.part, o.segment, report.plan, report));
  return write_outputs(o, snap, writer, std::move(report), t0);
}

}  // namespace iris
