// An .iris archive (or archive set) as a conversion source, read in place: each stored
// component becomes a table entry over its file's mapping, the tensors keep the descriptors the
// archive holds (quantized codes tiled: source_tensors.h TiledCodes reads them back row-major),
// and the embedded files come along byte for byte. Nothing is exported to a temporary folder:
// the archive is read once, where the export detour wrote and read it again (issue 28).
#include "converter/sources/archive_snapshot.h"

#include <algorithm>
#include <filesystem>

#include "converter/sources/snapshot.h"
#include "formats/iris_archive.h"
#include "formats/json_limits.h"

namespace iris {

using nlohmann::json;

std::map<std::string, std::string> recorded_safetensors_metadata(const IrisArchive& a) {
  std::map<std::string, std::string> m;
  const auto& p = a.manifest().provenance;
  if (p.is_object())
    if (auto it = p.find("safetensors_metadata"); it != p.end() && it->is_object())
      for (const auto& [k, v] : it->items())
        if (v.is_string()) m[k] = v.get<std::string>();
  m.emplace("format", "pt");
  return m;
}

std::vector<std::string> unquantized_linear_modules(const IrisArchive& a) {
  std::vector<std::string> out;
  for (const auto& t : a.manifest().tensors)
    if (!is_quantized(t.desc.format) && t.desc.shape.size() == 2 && t.desc.name.ends_with(".weight"))
      out.push_back(t.desc.name.substr(0, t.desc.name.size() - 7));
  return out;
}

Result<Snapshot> Snapshot::open_archive(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(IrisArchive opened, IrisArchive::open(path));
  auto a = std::make_shared<const IrisArchive>(std::move(opened));
  Snapshot s;
  s.resolved_from_ = "iris-archive " + path;
  s.archive_ = a;
  s.archive_metadata_ = recorded_safetensors_metadata(*a);

  // Embedded files: config.json gives the config; all of them travel on byte for byte.
  for (const auto& f : a->manifest().files) {
    IRIS_ASSIGN_OR_RETURN(std::string text, a->read_file(f.name));
    if (f.name == "config.json") {
      IRIS_ASSIGN_OR_RETURN(json j, parse_untrusted_json(text, path + ": config.json"));
      IRIS_ASSIGN_OR_RETURN(s.config_, parse_model_config(j, path + ": config.json"));
      s.config_json_ = std::move(j);
    }
    s.aux_files_.push_back({f.name, std::move(text)});
  }
  // The source skip list: the checkpoint's own list described the checkpoint, not the archive.
  // Where the archive holds quantized tensors, its unquantized linears were kept so on purpose
  // (a source skip list or a rule of the conversion that made it), as export's
  // quantization_config says; otherwise there is nothing to keep.
  bool any_quantized = false;
  for (const auto& t : a->manifest().tensors) any_quantized |= is_quantized(t.desc.format);
  s.config_.skip_modules = any_quantized ? unquantized_linear_modules(*a) : std::vector<std::string>{};

  // One table per file of the archive (a set has several), entries named after their tensor
  // ("NAME" for unquantized data, "NAME#ROLE" for a quantized tensor's components). The
  // components are found again by position, not by name: an untrusted archive may hold names
  // that collide with these.
  const auto& tensors = a->manifest().tensors;
  struct Slot {
    size_t tensor, component;
  };
  std::vector<std::vector<std::pair<SafetensorsTensor, Slot>>> tables(a->file_count());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    for (size_t j = 0; j < t.components.size(); ++j) {
      const auto& c = t.components[j];
      if (c.file >= tables.size()) return internal_error(path + ": tensor '" + t.desc.name + "': component in no file of the archive");
      SafetensorsTensor e;
      e.name = is_quantized(t.desc.format) ? t.desc.name + "#" + role_name(c.spec.role) : t.desc.name;
      e.dtype = c.spec.dtype;
      e.shape = c.spec.shape;
      e.numel = 1;
      for (auto d : e.shape) e.numel *= d;
      e.offset = a->absolute_offset(c);
      e.size = c.spec.bytes;
      tables[c.file].push_back({std::move(e), Slot{i, j}});
    }
  }
  s.stored_.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    s.stored_[i].index = i;
    s.stored_[i].components.resize(tensors[i].components.size());
  }
  for (size_t f = 0; f < tables.size(); ++f) {
    auto& table = tables[f];
    std::stable_sort(table.begin(), table.end(), [](const auto& x, const auto& y) { return x.first.offset < y.first.offset; });
    std::vector<SafetensorsTensor> entries;
    entries.reserve(table.size());
    for (auto& [e, slot] : table) entries.push_back(std::move(e));
    // Descriptors on demand (the archive holds one a file already; a set of hundreds of
    // members would need twice RLIMIT_NOFILE's worth), each read checking the path still
    // names the file the archive opened and verified.
    IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(a->file_path(f), MappedFile::Descriptor::kOnDemand));
    s.shards_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::from_table(std::move(map), std::move(entries))));
    const SafetensorsFile* file = s.shards_.back().get();
    for (size_t k = 0; k < table.size(); ++k) {
      const Slot slot = table[k].second;
      s.stored_[slot.tensor].components[slot.component] = {tensors[slot.tensor].components[slot.component].spec.role,
                                                            SnapshotTensor{file, &file->tensors()[k]}};
    }
  }
  for (const auto& sh : s.shards_)
    for (const auto& t : sh->tensors()) s.tensors_.push_back({sh.get(), &t});
  s.index_names();
  return s;
}

}  // namespace iris
