#include "converter/inspect/inspect.h"

#include <map>

#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "formats/json_text.h"

namespace iris {

using nlohmann::json;

// Fills an Inspection: the summary in one pass over the tensors, each tensor's JSON later.
struct InspectionBuilder {
  Inspection in;
  void name_seen(size_t bytes) { in.longest_name_ = std::max(in.longest_name_, bytes); }
  Inspection done(json summary, size_t count, std::function<json(size_t)> tensor, std::function<Inspection::Row(size_t)> row = {}) {
    in.summary_ = std::move(summary);
    in.count_ = count;
    in.tensor_ = std::move(tensor);
    in.row_ = std::move(row);
    return std::move(in);
  }
};

namespace {

json archive_tensor(const IrisArchive& a, const ArchiveTensor& t) {
  json tj = tensor_desc_to_json(t.desc);
  uint64_t bytes = 0;
  json comps = json::array();
  for (const auto& c : t.components) {
    bytes += c.spec.bytes;
    comps.push_back({{"role", role_name(c.spec.role)}, {"dtype", std::string(dtype_archive_name(c.spec.dtype))}, {"shape", c.spec.shape},
                     {"offset", a.absolute_offset(c)}, {"bytes", c.spec.bytes}});
  }
  tj["bytes"] = bytes;
  tj["offset"] = t.components.empty() ? 0 : a.absolute_offset(t.components[0]);
  tj["components"] = comps;
  if (a.is_set() && !t.components.empty()) tj["file"] = a.file_path(t.components[0].file);  // its member (a tensor is in one)
  return tj;
}

Result<Inspection> inspect_archive(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(IrisArchive opened, IrisArchive::open(path));
  auto a = std::make_shared<const IrisArchive>(std::move(opened));
  const Manifest& m = a->manifest();
  InspectionBuilder b;
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_format;
  for (const auto& t : m.tensors) {
    for (const auto& c : t.components) total += c.spec.bytes;
    by_format[storage_name(t.desc)] += 1;
    b.name_seen(t.desc.name.size());
  }
  json files = json::array();
  for (const auto& f : m.files) files.push_back({{"name", f.name}, {"bytes", f.raw_size}, {"stored_bytes", f.size}});
  uint64_t set_bytes = 0;  // every file of the archive (a set: the index and its members)
  for (size_t f = 0; f < a->file_count(); ++f) set_bytes += a->file_mapping(f).size();
  json summary = json{{"kind", "archive"},
                       {"path", path},
                       {"format_version", std::to_string(a->preamble().version_major) + "." + std::to_string(a->preamble().version_minor)},
                       {"model_type", m.model_type},
                       {"tool", m.tool},
                       {"provenance", m.provenance},
                       {"file_bytes", set_bytes},
                       {"tensor_bytes", total},
                       {"tensor_count", m.tensors.size()},
                       {"formats", by_format},
                       {"files", files}};
  if (!m.part.is_null()) summary["part"] = m.part;  // a conversion part (FORMAT.md section 9)
  if (a->is_set()) {  // an archive set (section 10): its files, the index first
    json set_files = json::array();
    for (size_t f = 0; f < a->file_count(); ++f)
      set_files.push_back({{"path", a->file_path(f)}, {"bytes", a->file_mapping(f).size()}});
    summary["set"] = {{"id", m.set.value("id", "")}, {"files", set_files}};
  }
  if (!m.set_member.is_null()) summary["set_member"] = m.set_member;  // a member opened alone
  if (!m.rank.is_null()) {  // a tensor-parallel rank's archive (section 11), less its list of boxes
    json r = m.rank;
    if (r.is_object()) r.erase("tensors");
    summary["rank"] = r;
  }
  return b.done(std::move(summary), m.tensors.size(), [a](size_t i) { return archive_tensor(*a, a->manifest().tensors[i]); });
}

// A seed-engine v1 archive: its table as it is (v1 has no formats, only raw dtypes).
Result<Inspection> inspect_v1(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(V1Archive opened, V1Archive::open(path));
  auto a = std::make_shared<const V1Archive>(std::move(opened));
  InspectionBuilder b;
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_dtype;
  for (const auto& e : a->entries()) {
    total += e.nbytes;
    by_dtype[v1_dtype_name(e.dtype)] += 1;
    b.name_seen(e.name.size());
  }
  json summary = json{{"kind", "archive"},
                       {"path", path},
                       {"format_version", "1"},
                       {"checksums", false},
                       {"note", "a .iris v1 archive (the seed engine's): raw blobs, no checksums, no quantization metadata"},
                       {"file_bytes", a->mapping().size()},
                       {"tensor_bytes", total},
                       {"tensor_count", a->entries().size()},
                       {"formats", json{{"raw", a->entries().size()}}},
                       {"dtypes", by_dtype},
                       {"files", json::array()}};
  return b.done(std::move(summary), a->entries().size(), [a](size_t i) -> json {
    const auto& e = a->entries()[i];
    return {{"name", e.name}, {"format", "raw"}, {"dtype", v1_dtype_name(e.dtype)}, {"shape", e.shape}, {"offset", e.offset},
            {"bytes", e.nbytes}};
  });
}

// The snapshot and its logical tensors, which point into it: kept alive together.
struct OpenSnapshot {
  Snapshot snapshot;
  std::vector<SourceTensor> sources;
};

uint64_t snapshot_bytes(const SourceTensor& st) {
  uint64_t bytes = 0;
  for (const auto& p : st.parts) bytes += p.ref.tensor->size;
  return bytes;
}

// tensor_desc_to_json() less "layout": a snapshot's layout is not chosen yet.
json snapshot_tensor(const SourceTensor& st) {
  json tj = tensor_desc_to_json(st.desc);
  tj.erase("layout");
  tj["bytes"] = snapshot_bytes(st);
  tj["offset"] = st.parts[0].ref.tensor->offset;
  tj["file"] = st.parts[0].ref.file->path();
  tj["source"] = st.source_json();
  return tj;
}

// row_of(snapshot_tensor(st)), field by field.
Inspection::Row snapshot_row(const SourceTensor& st) {
  Inspection::Row r;
  r.name = st.desc.name;
  r.shape = "[";
  for (size_t i = 0; i < st.desc.shape.size(); ++i) {
    if (i) r.shape += ',';
    r.shape += std::to_string(st.desc.shape[i]);
  }
  r.shape += "]";
  r.format = storage_name(st.desc);
  r.dtype = dtype_archive_name(st.desc.dtype);
  r.bytes = snapshot_bytes(st);
  r.offset = st.parts[0].ref.tensor->offset;
  if (is_quantized(st.desc.format)) r.params = dump_json(st.desc.params);
  return r;
}

Result<Inspection> inspect_snapshot(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(Snapshot opened, Snapshot::open(path));
  auto s = std::make_shared<OpenSnapshot>(OpenSnapshot{std::move(opened), {}});
  IRIS_ASSIGN_OR_RETURN(s->sources, group_source_tensors(s->snapshot));
  InspectionBuilder b;
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_format;
  for (const auto& st : s->sources) {
    for (const auto& p : st.parts) total += p.ref.tensor->size;
    by_format[storage_name(st.desc)] += 1;  // the layout, chosen per tensor, does not enter it
    b.name_seen(st.desc.name.size());
  }
  json files = json::array();
  for (const auto& f : s->snapshot.aux_files()) files.push_back({{"name", f.name}, {"bytes", f.bytes.size()}});
  const Snapshot& snap = s->snapshot;
  const json metadata = snap.safetensors_metadata();
  json summary = json{{"kind", "snapshot"},   {"path", path},           {"resolved", snap.resolved_from()},
                       {"model_type", snap.config().model_type}, {"quantization_config", snap.config().quantization_config},
                       {"tensor_bytes", total}, {"tensor_count", s->sources.size()}, {"formats", by_format},
                       {"files", files},       {"warnings", snap.warnings()}, {"metadata", metadata}};
  return b.done(std::move(summary), s->sources.size(), [s](size_t i) { return snapshot_tensor(s->sources[i]); },
                [s](size_t i) { return snapshot_row(s->sources[i]); });
}

}  // namespace

Result<Inspection> Inspection::open(const std::string& path) {
  if (is_iris_v1_archive(path)) return inspect_v1(path);
  if (is_iris_archive(path)) return inspect_archive(path);
  return inspect_snapshot(path);
}

namespace {

std::string layout_text(const json& l) {
  std::string k = l.value("kind", "");
  if (k != "tiled") return k;
  return "tiled " + std::to_string(l.value("tile_n", 0)) + "x" + std::to_string(l.value("tile_k", 0)) + " pad " +
         std::to_string(l.value("padded_n", 0)) + "x" + std::to_string(l.value("padded_k", 0));
}

}  // namespace

Inspection::Row Inspection::row_of(const json& t) {
  Row r;
  r.name = t["name"].get<std::string>();
  r.shape = dump_json(t["shape"]);
  r.format = t["format"].get<std::string>();
  r.dtype = t["dtype"].get<std::string>();
  r.layout = t.contains("layout") ? layout_text(t["layout"]) : "";
  r.bytes = t["bytes"].get<uint64_t>();
  r.offset = t["offset"].get<uint64_t>();
  if (t.contains("params")) r.params = dump_json(t["params"]);
  return r;
}

json Inspection::to_json() const {
  json j = summary_;
  json tensors = json::array();
  for (size_t i = 0; i < count_; ++i) tensors.push_back(tensor(i));
  j["tensors"] = std::move(tensors);
  return j;
}

Result<json> inspect_path(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(Inspection in, Inspection::open(path));
  return in.to_json();
}

}  // namespace iris
