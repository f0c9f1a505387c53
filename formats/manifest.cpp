#include "formats/manifest.h"

#include <algorithm>
#include <unordered_set>

#include "common/checked_math.h"
#include "common/hashing.h"
#include "formats/iris_preamble.h"
#include "formats/names.h"

namespace iris {

using nlohmann::json;

SourceRecord SourceRecord::from_text(std::string text) {
  SourceRecord r;
  r.text_ = std::move(text);
  r.kind_ = Kind::kText;
  return r;
}

nlohmann::json SourceRecord::json() const {
  switch (kind_) {
    case Kind::kEmpty: return nlohmann::json::object();
    case Kind::kJson: return json_;
    case Kind::kText: return nlohmann::json::parse(text_);
  }
  return nullptr;
}

const StoredComponent* ArchiveTensor::component(Role role) const {
  for (const auto& c : components)
    if (c.spec.role == role) return &c;
  return nullptr;
}

json tensor_desc_to_json(const TensorDesc& d) {
  json t;
  t["name"] = d.name;
  t["shape"] = d.shape;
  t["dtype"] = std::string(dtype_archive_name(d.dtype));
  t["format"] = storage_name(d);
  if (is_quantized(d.format)) t["params"] = d.params;
  json l;
  l["kind"] = layout_kind_name(d.layout.kind);
  if (d.layout.kind == LayoutKind::kTiled) {
    l["tile_n"] = d.layout.tile_n;
    l["tile_k"] = d.layout.tile_k;
    if (auto g = matrix_geometry(d); g.is_ok()) {
      l["padded_n"] = g->padded_n;
      l["padded_k"] = g->padded_k;
    }
  }
  t["layout"] = l;
  return t;
}

json archive_tensor_to_json(const ArchiveTensor& t) {
  json tj = tensor_desc_to_json(t.desc);
  json comps = json::array();
  for (const auto& c : t.components) {
    comps.push_back({{"role", role_name(c.spec.role)},
                     {"dtype", std::string(dtype_archive_name(c.spec.dtype))},
                     {"shape", c.spec.shape},
                     {"offset", c.offset},
                     {"bytes", c.spec.bytes},
                     {"xxh3", hash_hex(c.xxh3)}});
  }
  tj["components"] = comps;
  tj["source"] = t.source.json();
  return tj;
}

uint64_t manifest_text_size(const Manifest& m) {
  // The document without its tensors, then each tensor as dump(1) writes it inside the
  // "tensors" list: two levels deep, so each of its lines but the first gains two spaces.
  Manifest empty;
  empty.alignment = m.alignment;
  empty.model_type = m.model_type;
  empty.tool = m.tool;
  empty.provenance = m.provenance;
  empty.files = m.files;
  empty.part = m.part;
  empty.set = m.set;
  empty.set_member = m.set_member;
  empty.rank = m.rank;
  uint64_t size = manifest_to_json(empty).dump(1).size();
  if (m.tensors.empty()) return size;
  size -= 2;  // "[]"
  for (const auto& t : m.tensors) {
    const std::string text = archive_tensor_to_json(t).dump(1);
    size += text.size() + 2 * uint64_t(std::count(text.begin(), text.end(), '\n'));
    size += 4;  // its indent "  " and the ",\n" after it
  }
  return size + 3;  // "[\n" opens, the last ",\n" is "\n", then " ]"
}

uint16_t manifest_minor_version(const Manifest& m) {
  // The newest feature a file holds: 6 for an int_group tensor with a post_factor (FORMAT.md
  // 4.5, LLM.int8), 5 for an nvfp4 tensor (4.6), 4 for an int_group one (4.5), then 3 a rank
  // record, 2 a set's index or member, 1 a part; 0 for an archive with none of them.
  for (const auto& t : m.tensors)
    if (t.desc.format == Format::kIntGroup && t.desc.params.contains("post_factor")) return 6;
  for (const auto& t : m.tensors)
    if (t.desc.format == Format::kNvfp4) return 5;
  for (const auto& t : m.tensors)
    if (t.desc.format == Format::kIntGroup) return 4;
  if (!m.rank.is_null()) return 3;
  if (!m.set.is_null() || !m.set_member.is_null()) return 2;
  return m.part.is_null() ? kIrisVersionMinor : uint16_t(1);
}

json manifest_to_json(const Manifest& m) {
  json j;
  j["format"] = "iris";
  j["format_version"] = {kIrisVersionMajor, manifest_minor_version(m)};
  if (!m.part.is_null()) j["part"] = m.part;
  if (!m.set.is_null()) j["set"] = m.set;
  if (!m.set_member.is_null()) j["set_member"] = m.set_member;
  if (!m.rank.is_null()) j["rank"] = m.rank;
  j["alignment"] = m.alignment;
  j["model_type"] = m.model_type;
  j["tool"] = m.tool;
  j["provenance"] = m.provenance;
  json tensors = json::array();
  for (const auto& t : m.tensors) tensors.push_back(archive_tensor_to_json(t));
  j["tensors"] = std::move(tensors);
  json files = json::array();
  for (const auto& f : m.files)
    files.push_back({{"name", f.name},
                     {"encoding", f.encoding},
                     {"offset", f.offset},
                     {"bytes", f.size},
                     {"raw_bytes", f.raw_size},
                     {"xxh3", hash_hex(f.xxh3)}});
  j["files"] = std::move(files);
  return j;
}

namespace {

using Range = ManifestReader::Range;

// What a byte range holds, for the overlap message: named only when one is reported (a
// string per range cost 48k allocations for a 36k-tensor manifest, issue 24 item 5).
std::string range_name(const Manifest& m, const Range& r) {
  if (r.component < 0) return "file " + m.files[r.item].name;
  const ArchiveTensor& t = m.tensors[r.item];
  return t.desc.name + "/" + role_name(t.components[size_t(r.component)].spec.role);
}

// Non-negative integers, whether nlohmann holds them as signed (built in memory) or unsigned (parsed).
bool is_nonneg_int(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

Result<uint64_t> get_u64(const json& o, const char* key, const std::string& ctx) {
  auto it = o.find(key);
  if (it == o.end() || !is_nonneg_int(*it)) return invalid_input(ctx + "'" + key + "' missing or not an unsigned integer");
  return it->get<uint64_t>();
}

Result<std::string> get_str(const json& o, const char* key, const std::string& ctx) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return invalid_input(ctx + "'" + key + "' missing or not a string");
  return it->get<std::string>();
}

Result<std::vector<uint64_t>> get_shape(const json& o, const char* key, const std::string& ctx) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_array() || it->size() > 16) return invalid_input(ctx + "'" + key + "' missing or not a list of at most 16 dims");
  std::vector<uint64_t> s;
  for (const auto& v : *it) {
    if (!is_nonneg_int(v) || v.get<uint64_t>() >= (uint64_t(1) << 48))
      return invalid_input(ctx + "'" + key + "' holds " + v.dump() + ", not a dimension in [0, 2^48)");
    s.push_back(v.get<uint64_t>());
  }
  return s;
}

Result<uint64_t> get_hash(const json& o, const std::string& ctx) {
  IRIS_ASSIGN_OR_RETURN(std::string h, get_str(o, "xxh3", ctx));
  uint64_t v;
  if (!parse_hash_hex(h, &v)) return invalid_input(ctx + "'xxh3' is not 16 lowercase hex digits");
  return v;
}

Status check_range(uint64_t offset, uint64_t bytes, uint64_t alignment, uint64_t data_size, const std::string& ctx,
                   std::vector<Range>* ranges, size_t item, int component) {
  if (offset % alignment != 0) return invalid_input(ctx + "offset " + std::to_string(offset) + " is not " + std::to_string(alignment) + "-aligned");
  auto end = checked_add(offset, bytes);
  if (!end || *end > data_size)
    return invalid_input(ctx + "bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") run past the " +
                         std::to_string(data_size) + "-byte data section");
  ranges->push_back({offset, *end, item, component});
  return Status::ok();
}

// `ctx` is "PATH: tensor 'NAME': " for this file's own messages; checks shared with the
// writer name the tensor themselves, so `path` alone is added to theirs.
// Moves the params out of `t` (the caller's document is discarded after it is read).
Result<TensorDesc> desc_from_json(json& t, const std::string& ctx, const std::string& path) {
  TensorDesc d;
  IRIS_ASSIGN_OR_RETURN(d.name, get_str(t, "name", ctx));
  IRIS_ASSIGN_OR_RETURN(d.shape, get_shape(t, "shape", ctx));
  IRIS_ASSIGN_OR_RETURN(std::string dt, get_str(t, "dtype", ctx));
  auto dtype = dtype_from_archive_name(dt);
  if (!dtype) return invalid_input(ctx + "unknown dtype '" + dt + "'");
  d.dtype = *dtype;
  IRIS_ASSIGN_OR_RETURN(std::string fmt, get_str(t, "format", ctx));
  if (auto f = format_from_name(fmt)) {
    d.format = *f;
    auto p = t.find("params");
    if (p == t.end() || !p->is_object()) return invalid_input(ctx + "quantized tensor without a 'params' object");
    d.params = std::move(*p);
  } else if (fmt == dt) {
    d.format = Format::kRaw;
  } else {
    return invalid_input(ctx + "unknown format '" + fmt + "'");
  }
  auto l = t.find("layout");
  if (l == t.end() || !l->is_object()) return invalid_input(ctx + "'layout' missing");
  IRIS_ASSIGN_OR_RETURN(std::string kind, get_str(*l, "kind", ctx + "layout: "));
  if (kind == "row_major") {
    d.layout.kind = LayoutKind::kRowMajor;
  } else if (kind == "flat") {
    d.layout.kind = LayoutKind::kFlat;
  } else if (kind == "tiled") {
    d.layout.kind = LayoutKind::kTiled;
    IRIS_ASSIGN_OR_RETURN(d.layout.tile_n, get_u64(*l, "tile_n", ctx + "layout: "));
    IRIS_ASSIGN_OR_RETURN(d.layout.tile_k, get_u64(*l, "tile_k", ctx + "layout: "));
    auto geometry = matrix_geometry(d);
    if (!geometry.is_ok()) return geometry.status().with_context(path + ": ");
    const MatrixGeometry& g = *geometry;
    IRIS_ASSIGN_OR_RETURN(uint64_t pn, get_u64(*l, "padded_n", ctx + "layout: "));
    IRIS_ASSIGN_OR_RETURN(uint64_t pk, get_u64(*l, "padded_k", ctx + "layout: "));
    if (pn != g.padded_n || pk != g.padded_k)
      return invalid_input(ctx + "layout padding " + std::to_string(pn) + "x" + std::to_string(pk) +
                           " disagrees with shape and tile (" + std::to_string(g.padded_n) + "x" + std::to_string(g.padded_k) + ")");
  } else {
    return invalid_input(ctx + "unknown layout kind '" + kind + "'");
  }
  return d;
}

}  // namespace

// The provenance record (FORMAT.md section 3): every reader checks the same schema, so an
// archive `verify` accepts never trips a later reader (export rebuilds tensors from it).
static Status check_source_record(const json& s, const std::string& ctx) {
  if (!s.is_object()) return invalid_input(ctx + "not an object");
  if (auto r = s.find("requantized_from"); r != s.end() && !r->is_string()) return invalid_input(ctx + "'requantized_from' is not a string");
  auto parts = s.find("tensors");
  if (parts == s.end()) return Status::ok();
  if (!parts->is_array()) return invalid_input(ctx + "'tensors' is not a list");
  for (size_t i = 0; i < parts->size(); ++i) {
    const json& p = (*parts)[i];
    const std::string pctx = ctx + "tensors[" + std::to_string(i) + "]: ";
    if (!p.is_object()) return invalid_input(pctx + "not an object");
    IRIS_ASSIGN_OR_RETURN(std::string role, get_str(p, "role", pctx));
    if (!source_role_ok(role)) return invalid_input(pctx + "unknown role '" + role + "'");
    IRIS_ASSIGN_OR_RETURN(std::string name, get_str(p, "name", pctx));
    IRIS_ASSIGN_OR_RETURN(std::string dtype, get_str(p, "dtype", pctx));
    IRIS_ASSIGN_OR_RETURN(auto shape, get_shape(p, "shape", pctx));
    if (auto f = p.find("file"); f != p.end() && !f->is_string()) return invalid_input(pctx + "'file' is not a string");
    (void)name, (void)dtype, (void)shape;
  }
  return Status::ok();
}

Status check_manifest_version(const json& j, uint16_t major, uint16_t minor, const std::string& path) {
  auto v = j.is_object() ? j.find("format_version") : j.end();
  const json want = {major, minor};
  if (v == j.end()) return invalid_input(path + ": manifest: 'format_version' missing");
  if (*v != want)
    return invalid_input(path + ": manifest: format_version " + v->dump() + " disagrees with the preamble's " + std::to_string(major) +
                         "." + std::to_string(minor));
  return Status::ok();
}

ManifestReader::ManifestReader(uint64_t data_size, std::string path) : data_size_(data_size), path_(std::move(path)) {}

void ManifestReader::add_tensor(json& tj) {
  if (!error_.is_ok()) return;  // the first error in document order is the one reported
  error_ = read_tensor(tj);
}

// One entry of "tensors". The alignment is taken as kIrisAlignment: finish() refuses any other
// before it reports what this found.
Status ManifestReader::read_tensor(json& tj) {
  const std::string& path = path_;
  const std::string mctx = path + ": manifest: ";
  if (!tj.is_object()) return invalid_input(mctx + "a tensor entry is not an object");
  const auto name_it = tj.find("name");
  std::string name = name_it != tj.end() && name_it->is_string() ? name_it->get<std::string>() : "?";
  const std::string ctx = path + ": tensor '" + name + "': ";
  ArchiveTensor at;
  IRIS_ASSIGN_OR_RETURN(at.desc, desc_from_json(tj, ctx, path));
  if (const char* why = tensor_name_problem(at.desc.name))
    return invalid_input(path + ": tensor '" + escaped_name(at.desc.name) + "': " + why);
  // Listed before it is complete, so that the name set can refer to it by position.
  tensors_.push_back(std::move(at));
  const size_t index = tensors_.size() - 1;
  if (!names_.insert(index).second) return invalid_input(ctx + "name appears twice in the manifest");
  ArchiveTensor& t = tensors_.back();
  auto specs = component_specs(t.desc);
  if (!specs.is_ok()) return specs.status().with_context(path + ": ");
  auto comps = tj.find("components");
  if (comps == tj.end() || !comps->is_array()) return invalid_input(ctx + "'components' missing");
  if (comps->size() != specs->size())
    return invalid_input(ctx + std::to_string(comps->size()) + " components listed, its descriptor needs " + std::to_string(specs->size()));
  for (size_t i = 0; i < specs->size(); ++i) {
    const json& cj = (*comps)[i];
    const ComponentSpec& want = (*specs)[i];
    const std::string cctx = ctx + "component '" + role_name(want.role) + "': ";
    if (!cj.is_object()) return invalid_input(cctx + "not an object");
    IRIS_ASSIGN_OR_RETURN(std::string role, get_str(cj, "role", cctx));
    IRIS_ASSIGN_OR_RETURN(std::string cdt, get_str(cj, "dtype", cctx));
    IRIS_ASSIGN_OR_RETURN(auto shape, get_shape(cj, "shape", cctx));
    StoredComponent c;
    c.spec = want;
    IRIS_ASSIGN_OR_RETURN(c.offset, get_u64(cj, "offset", cctx));
    IRIS_ASSIGN_OR_RETURN(uint64_t bytes, get_u64(cj, "bytes", cctx));
    IRIS_ASSIGN_OR_RETURN(c.xxh3, get_hash(cj, cctx));
    if (role != role_name(want.role) || cdt != dtype_archive_name(want.dtype) || shape != want.shape || bytes != want.bytes)
      return invalid_input(cctx + "listed as " + role + " " + cdt + " " + json(shape).dump() + " (" + std::to_string(bytes) +
                           " bytes) but the descriptor needs " + role_name(want.role) + " " + std::string(dtype_archive_name(want.dtype)) +
                           " " + json(want.shape).dump() + " (" + std::to_string(want.bytes) + " bytes)");
    IRIS_TRY(check_range(c.offset, c.spec.bytes, kIrisAlignment, data_size_, cctx, &ranges_, index, int(i)));
    t.components.push_back(std::move(c));
  }
  if (auto s = tj.find("source"); s != tj.end()) {
    IRIS_TRY(check_source_record(*s, ctx + "source: "));
    t.source = SourceRecord(std::move(*s));
  }
  return Status::ok();
}

void ManifestReader::add_checked(ArchiveTensor t) {
  tensors_.push_back(std::move(t));
  const size_t index = tensors_.size() - 1;
  const auto& comps = tensors_.back().components;
  for (size_t i = 0; i < comps.size(); ++i) ranges_.push_back({comps[i].offset, comps[i].offset + comps[i].spec.bytes, index, int(i)});
}

Result<Manifest> ManifestReader::finish(json j) {
  const std::string& path = path_;
  const uint64_t data_size = data_size_;
  const std::string mctx = path + ": manifest: ";
  if (!j.is_object()) return invalid_input(mctx + "not a JSON object");
  Manifest m;
  IRIS_ASSIGN_OR_RETURN(std::string fmt, get_str(j, "format", mctx));
  if (fmt != "iris") return invalid_input(mctx + "'format' is not \"iris\"");
  IRIS_ASSIGN_OR_RETURN(m.alignment, get_u64(j, "alignment", mctx));
  if (m.alignment != kIrisAlignment) return invalid_input(mctx + "alignment must be 4096");
  if (auto mt = j.find("model_type"); mt != j.end()) {
    if (!mt->is_string()) return invalid_input(mctx + "'model_type' is not a string");
    m.model_type = mt->get<std::string>();
  }
  if (auto t = j.find("tool"); t != j.end()) m.tool = std::move(*t);
  if (auto p = j.find("provenance"); p != j.end()) m.provenance = std::move(*p);
  if (auto p = j.find("part"); p != j.end()) {
    if (!p->is_object()) return invalid_input(mctx + "'part' is not an object");
    m.part = std::move(*p);
  }
  if (auto p = j.find("set"); p != j.end()) {
    if (!p->is_object()) return invalid_input(mctx + "'set' is not an object");
    m.set = std::move(*p);
  }
  if (auto p = j.find("set_member"); p != j.end()) {
    if (!p->is_object()) return invalid_input(mctx + "'set_member' is not an object");
    m.set_member = std::move(*p);
  }
  if (auto p = j.find("rank"); p != j.end()) {
    if (!p->is_object()) return invalid_input(mctx + "'rank' is not an object");
    m.rank = std::move(*p);
  }
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array()) return invalid_input(mctx + "'tensors' missing or not a list");
  // Entries not streamed in by add_tensor() (a document parsed whole) are read now, in order.
  tensors_.reserve(tensors_.size() + tensors->size());
  for (auto& tj : *tensors) add_tensor(tj);
  IRIS_TRY(error_);
  m.tensors = std::move(tensors_);
  std::vector<Range>& ranges = ranges_;
  if (auto files = j.find("files"); files != j.end()) {
    if (!files->is_array()) return invalid_input(mctx + "'files' is not a list");
    std::unordered_set<std::string> fnames;
    for (const auto& fj : *files) {
      StoredFile f;
      IRIS_ASSIGN_OR_RETURN(f.name, get_str(fj, "name", mctx + "file: "));
      const std::string fctx = path + ": embedded file '" + f.name + "': ";
      if (const char* why = file_name_problem(f.name))
        return invalid_input(path + ": embedded file '" + escaped_name(f.name) + "': " + why);
      if (!fnames.insert(f.name).second) return invalid_input(fctx + "listed twice");
      IRIS_ASSIGN_OR_RETURN(f.encoding, get_str(fj, "encoding", fctx));
      if (f.encoding != "zstd" && f.encoding != "raw") return invalid_input(fctx + "unknown encoding '" + f.encoding + "'");
      IRIS_ASSIGN_OR_RETURN(f.offset, get_u64(fj, "offset", fctx));
      IRIS_ASSIGN_OR_RETURN(f.size, get_u64(fj, "bytes", fctx));
      IRIS_ASSIGN_OR_RETURN(f.raw_size, get_u64(fj, "raw_bytes", fctx));
      if (f.raw_size > kMaxManifestSize) return invalid_input(fctx + "raw size too large");
      if (f.encoding == "raw" && f.raw_size != f.size) return invalid_input(fctx + "raw file with two sizes");
      IRIS_ASSIGN_OR_RETURN(f.xxh3, get_hash(fj, fctx));
      IRIS_TRY(check_range(f.offset, f.size, m.alignment, data_size, fctx, &ranges, m.files.size(), -1));
      m.files.push_back(std::move(f));
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sweep with the furthest end seen so far; empty ranges occupy no bytes and overlap nothing.
  const Range* furthest = nullptr;
  for (const auto& r : ranges) {
    if (r.end == r.begin) continue;
    if (furthest && r.begin < furthest->end)
      return invalid_input(path + ": " + range_name(m, r) + " overlaps " + range_name(m, *furthest));
    if (!furthest || r.end > furthest->end) furthest = &r;
  }
  return m;
}

Result<Manifest> manifest_from_json(json j, uint64_t data_size, const std::string& path) {
  ManifestReader reader(data_size, path);
  return reader.finish(std::move(j));
}

}  // namespace iris
