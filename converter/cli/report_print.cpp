#include "converter/cli/report_print.h"

#include <algorithm>
#include <cmath>

#include "converter/cli/progress.h"
#include "formats/json_text.h"

namespace iris {

using nlohmann::json;

void print_plan(const ConvertReport& r, std::FILE* out) {
  size_t w = 4;
  for (const auto& o : r.outcomes) w = std::max(w, o.name.size());
  std::fprintf(out, "%-*s  %-9s    %-9s %12s  %-30s %s\n", int(w), "name", "from", "to", "bytes", "layout", "why");
  for (const auto& o : r.outcomes) {
    // The numbers as int, as they were printed when the layout was a JSON object read with
    // value(key, 0): the same text (a size of 2^31 or more would print wrapped, as it did).
    std::string layout = layout_kind_name(o.layout.kind);
    if (o.layout.kind == LayoutKind::kTiled)
      layout += " " + std::to_string(int(o.layout.tile_n)) + "x" + std::to_string(int(o.layout.tile_k)) + " pad " +
                std::to_string(int(o.layout.padded_n)) + "x" + std::to_string(int(o.layout.padded_k));
    std::fprintf(out, "%-*s  %-9s -> %-9s %12llu  %-30s %s%s\n", int(w), o.name.c_str(), o.from.c_str(), o.to.c_str(),
                 (unsigned long long)o.bytes, layout.c_str(), o.why.c_str(), o.lossy_requant ? " (requantized from a quantized source)" : "");
  }
  std::fprintf(out, "total: %zu tensors, %zu quantized, %s of tensor data (source %s)", r.tensors, r.quantized_tensors,
               human_bytes(double(r.planned_bytes)).c_str(), human_bytes(double(r.source_bytes)).c_str());
  if (r.written.file_bytes) std::fprintf(out, "; the archive: %llu bytes", (unsigned long long)r.written.file_bytes);
  std::fprintf(out, "\npredicted peak memory: %s (requantizing in chunks of %.1fM values, %d at a time)\n",
               human_bytes(double(r.predicted_peak_rss)).c_str(), double(r.chunk_floats) / 1e6, r.workers);
}

void print_quality_summary(const ConvertReport& r, std::FILE* out) {
  std::vector<const TensorOutcome*> q;
  for (const auto& o : r.outcomes)
    if (o.quality) q.push_back(&o);
  if (q.empty()) return;
  std::sort(q.begin(), q.end(), [](const TensorOutcome* a, const TensorOutcome* b) { return a->quality->snr_db() < b->quality->snr_db(); });
  size_t w = 4;
  for (const auto* o : q) w = std::max(w, o->name.size());
  std::fprintf(out, "requantized %zu tensors; worst first:\n%-*s  %-9s    %-9s %10s %12s %9s\n", q.size(), int(w), "name", "from", "to",
               "rel L2", "max |err|", "SNR dB");
  for (size_t i = 0; i < q.size() && i < 10; ++i) {
    const auto* o = q[i];
    std::fprintf(out, "%-*s  %-9s -> %-9s %10.3e %12.4g %9.2f%s\n", int(w), o->name.c_str(), o->from.c_str(), o->to.c_str(),
                 o->quality->rel_l2(), o->quality->max_abs_err, o->quality->snr_db(), o->lossy_requant ? "  (from a quantized source)" : "");
  }
  if (q.size() > 10) std::fprintf(out, "... %zu more (--report FILE.json lists all)\n", q.size() - 10);
}

void print_inspection(const Inspection& in) {
  const json& j = in.summary();
  std::printf("%s: %s", j["path"].get<std::string>().c_str(), j["kind"].get<std::string>().c_str());
  if (j.contains("format_version")) std::printf(" v%s", j["format_version"].get<std::string>().c_str());
  std::string mt = j.value("model_type", "");
  std::printf(", model_type %s\n", mt.empty() ? "(none)" : mt.c_str());
  if (j.contains("note")) std::printf("%s\n", j["note"].get<std::string>().c_str());
  if (j.contains("part") && j["part"].is_object()) {  // printed only as far as its fields are what they should be
    const json& p = j["part"];
    const auto u = [&](const char* k) { return p.contains(k) && p[k].is_number_unsigned() ? std::to_string(p[k].get<uint64_t>()) : std::string("?"); };
    std::printf("part %s/%s of a conversion (iris merge joins the parts): its tensors %s.. of %s, plan %s\n", u("index").c_str(),
                u("count").c_str(), u("first_tensor").c_str(), u("total_tensors").c_str(),
                p.contains("plan") && p["plan"].is_string() ? p["plan"].get<std::string>().c_str() : "?");
  }
  if (j.contains("set") && j["set"].is_object() && j["set"].contains("files") && j["set"]["files"].is_array()) {
    const json& files = j["set"]["files"];
    std::printf("archive set %s: the index and %zu member files\n", j["set"].value("id", "?").c_str(), files.size() - 1);
    for (const auto& f : files)
      if (f.is_object() && f.contains("path") && f["path"].is_string() && f.contains("bytes") && f["bytes"].is_number_unsigned())
        std::printf("  %s  %s\n", f["path"].get<std::string>().c_str(), human_bytes(double(f["bytes"].get<uint64_t>())).c_str());
  }
  if (j.contains("set_member") && j["set_member"].is_object()) {
    const json& p = j["set_member"];
    const auto u = [&](const char* k) { return p.contains(k) && p[k].is_number_unsigned() ? std::to_string(p[k].get<uint64_t>()) : std::string("?"); };
    std::printf("member %s/%s of an archive set (open its index to read the whole archive): its tensors %s.. of %s\n", u("index").c_str(),
                u("count").c_str(), u("first_tensor").c_str(), u("total_tensors").c_str());
  }
  if (j.contains("rank") && j["rank"].is_object()) {
    const json& p = j["rank"];
    const auto u = [&](const char* k) { return p.contains(k) && p[k].is_number_unsigned() ? std::to_string(p[k].get<uint64_t>()) : std::string("?"); };
    std::printf("rank %s of a world of %s (tp %s, ep %s): its tensors are boxes of %s logical tensors (iris verify --ranks proves the folder)\n",
                u("index").c_str(), u("world").c_str(), u("tp").c_str(), u("ep").c_str(), u("logical_tensors").c_str());
  }
  if (j.contains("provenance") && j["provenance"].is_object() && j["provenance"].contains("safetensors_metadata") &&
      !j["provenance"]["safetensors_metadata"].empty())
    std::printf("source safetensors metadata: %s\n", dump_json(j["provenance"]["safetensors_metadata"]).c_str());
  if (j.contains("metadata") && j["metadata"].is_object() && !j["metadata"].empty())
    std::printf("safetensors metadata: %s\n", dump_json(j["metadata"]).c_str());
  const size_t w = std::max<size_t>(4, in.longest_name());
  std::printf("%-*s  %-18s %-9s %-6s %-26s %12s %12s\n", int(w), "name", "shape", "format", "dtype", "layout", "bytes", "offset");
  for (size_t i = 0; i < in.tensor_count(); ++i) {
    const Inspection::Row t = in.row(i);
    std::printf("%-*s  %-18s %-9s %-6s %-26s %12llu %12llu\n", int(w), t.name.c_str(), t.shape.c_str(), t.format.c_str(), t.dtype.c_str(),
                t.layout.c_str(), (unsigned long long)t.bytes, (unsigned long long)t.offset);
    if (!t.params.empty()) std::printf("%-*s    params %s\n", int(w), "", t.params.c_str());
  }
  std::printf("total: %llu tensors, %s of tensor data", (unsigned long long)j["tensor_count"].get<uint64_t>(),
              human_bytes(double(j["tensor_bytes"].get<uint64_t>())).c_str());
  for (const auto& [k, v] : j["formats"].items()) std::printf(", %llu %s", (unsigned long long)v.get<uint64_t>(), k.c_str());
  std::printf("\n");
  if (!j["files"].empty()) {
    std::printf("files:");
    for (const auto& f : j["files"]) std::printf(" %s (%llu B)", f["name"].get<std::string>().c_str(), (unsigned long long)f["bytes"].get<uint64_t>());
    std::printf("\n");
  }
}

namespace {

// `v` as nlohmann dumps it with indent 2 when it sits `depth` spaces deep: every line after the
// first gains `depth` spaces (JSON strings hold no raw newline, so each '\n' starts a line).
void write_nested(const json& v, size_t depth, std::FILE* out) {
  const std::string text = dump_json(v, 2);
  const std::string pad(depth, ' ');
  size_t from = 0;
  for (size_t nl; (nl = text.find('\n', from)) != std::string::npos; from = nl + 1) {
    std::fwrite(text.data() + from, 1, nl + 1 - from, out);
    std::fwrite(pad.data(), 1, pad.size(), out);
  }
  std::fwrite(text.data() + from, 1, text.size() - from, out);
}

}  // namespace

void print_inspection_json(const Inspection& in, std::FILE* out) {
  json top = in.summary();
  top["ok"] = true;
  top["tensors"] = nullptr;  // its place among the keys, which nlohmann writes sorted
  std::fputs("{\n", out);
  size_t k = 0;
  for (auto it = top.begin(); it != top.end(); ++it, ++k) {
    std::fprintf(out, "  %s: ", dump_json(json(it.key())).c_str());
    if (it.key() != "tensors") {
      write_nested(it.value(), 2, out);
    } else if (in.tensor_count() == 0) {
      std::fputs("[]", out);
    } else {
      std::fputs("[\n", out);
      for (size_t i = 0; i < in.tensor_count(); ++i) {
        std::fputs("    ", out);
        write_nested(in.tensor(i), 4, out);
        std::fputs(i + 1 < in.tensor_count() ? ",\n" : "\n", out);
      }
      std::fputs("  ]", out);
    }
    std::fputs(k + 1 < top.size() ? ",\n" : "\n", out);
  }
  std::fputs("}\n", out);
}

}  // namespace iris
