#include "converter/inspect.h"

#include <cstdio>
#include <map>

#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "converter/hf/snapshot.h"
#include "converter/hf/source_tensors.h"

namespace iris {

using nlohmann::json;

namespace {

Result<json> inspect_archive(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(path));
  const Manifest& m = a.manifest();
  json tensors = json::array();
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_format;
  for (const auto& t : m.tensors) {
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
    total += bytes;
    by_format[tj["format"].get<std::string>()] += 1;
    tensors.push_back(std::move(tj));
  }
  json files = json::array();
  for (const auto& f : m.files) files.push_back({{"name", f.name}, {"bytes", f.raw_size}, {"stored_bytes", f.size}});
  return json{{"kind", "archive"},
              {"path", path},
              {"format_version", std::to_string(a.preamble().version_major) + "." + std::to_string(a.preamble().version_minor)},
              {"model_type", m.model_type},
              {"tool", m.tool},
              {"provenance", m.provenance},
              {"file_bytes", a.mapping().size()},
              {"tensor_bytes", total},
              {"tensor_count", m.tensors.size()},
              {"formats", by_format},
              {"files", files},
              {"tensors", tensors}};
}

// A seed-engine v1 archive: its table as it is (v1 has no formats, only raw dtypes).
Result<json> inspect_v1(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(V1Archive a, V1Archive::open(path));
  json tensors = json::array();
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_dtype;
  for (const auto& e : a.entries()) {
    tensors.push_back({{"name", e.name}, {"format", "raw"}, {"dtype", v1_dtype_name(e.dtype)}, {"shape", e.shape}, {"offset", e.offset},
                       {"bytes", e.nbytes}});
    total += e.nbytes;
    by_dtype[v1_dtype_name(e.dtype)] += 1;
  }
  return json{{"kind", "archive"},
              {"path", path},
              {"format_version", "1"},
              {"checksums", false},
              {"note", "a .iris v1 archive (the seed engine's): raw blobs, no checksums, no quantization metadata"},
              {"file_bytes", a.mapping().size()},
              {"tensor_bytes", total},
              {"tensor_count", a.entries().size()},
              {"formats", json{{"raw", a.entries().size()}}},
              {"dtypes", by_dtype},
              {"files", json::array()},
              {"tensors", tensors}};
}

Result<json> inspect_snapshot(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(Snapshot s, Snapshot::open(path));
  IRIS_ASSIGN_OR_RETURN(auto sources, group_source_tensors(s));
  json tensors = json::array();
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_format;
  for (const auto& st : sources) {
    TensorDesc d = st.desc;
    d.layout = choose_layout(d, kDefaultTileN, kDefaultTileK);
    json tj = tensor_desc_to_json(d);
    tj.erase("layout");
    uint64_t bytes = 0;
    for (const auto& p : st.parts) bytes += p.ref.tensor->size;
    tj["bytes"] = bytes;
    tj["offset"] = st.parts[0].ref.tensor->offset;
    tj["file"] = st.parts[0].ref.file->path();
    tj["source"] = st.source_json();
    total += bytes;
    by_format[tj["format"].get<std::string>()] += 1;
    tensors.push_back(std::move(tj));
  }
  json files = json::array();
  for (const auto& f : s.aux_files()) files.push_back({{"name", f.name}, {"bytes", f.bytes.size()}});
  const json metadata = s.safetensors_metadata();
  return json{{"kind", "snapshot"},   {"path", path},           {"resolved", s.resolved_from()},
              {"model_type", s.config().model_type}, {"quantization_config", s.config().quantization_config},
              {"tensor_bytes", total}, {"tensor_count", sources.size()}, {"formats", by_format},
              {"files", files},       {"warnings", s.warnings()}, {"metadata", metadata}, {"tensors", tensors}};
}

}  // namespace

Result<json> inspect_path(const std::string& path) {
  if (is_iris_v1_archive(path)) return inspect_v1(path);
  if (is_iris_archive(path)) return inspect_archive(path);
  return inspect_snapshot(path);
}

}  // namespace iris
