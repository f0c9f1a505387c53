// read_manifest_fast(): the manifest read with JsonCursor, each tensor entry straight into an
// ArchiveTensor. It must accept exactly what read_manifest_parsed() accepts, or less: every
// check of ManifestReader::read_tensor() and check_source_record() is made here as a yes/no
// (the reference reader words the refusal), the rest of the document goes through the same
// parser and ManifestReader::finish(). Whatever this reader does not know how to read (an
// escape in a string, a key the writer does not write, a float where it expects an integer)
// is a no: the reference reader reads it.
#include <algorithm>
#include <utility>
#include <vector>

#include "common/checked_math.h"
#include "common/hashing.h"
#include "formats/iris_preamble.h"
#include "formats/json_limits.h"
#include "formats/json_scan.h"
#include "formats/manifest_text.h"
#include "formats/names.h"

namespace iris {

namespace {

using nlohmann::json;

// A shape as listed: the reference reader refuses more than 16 dims, and so does this one.
struct Dims {
  uint64_t v[16];
  size_t n = 0;
  bool operator==(const std::vector<uint64_t>& s) const { return s.size() == n && std::equal(v, v + n, s.begin()); }
};

struct ListedComponent {
  std::string_view role, dtype, xxh3;
  Dims shape;
  uint64_t offset = 0, bytes = 0;
};

struct ListedLayout {
  std::string_view kind;
  uint64_t tile_n = 0, tile_k = 0, padded_n = 0, padded_k = 0;
  unsigned seen = 0;  // bits of kLayoutKeys
};

constexpr std::string_view kLayoutKeys[] = {"kind", "tile_n", "tile_k", "padded_n", "padded_k"};

// Marks bit `bit` of `*seen`; false when it was marked already (a key repeated in one object).
bool first_time(unsigned* seen, unsigned bit) {
  if (*seen & bit) return false;
  *seen |= bit;
  return true;
}

// Nesting of the objects and lists that hold what each method reads (the document is 1): a
// value handed to the full parser must keep the whole text within kMaxJsonDepth.
constexpr int kEntryDepth = 3, kSourceDepth = 4, kSourcePartDepth = 6;

class FastReader {
 public:
  FastReader(std::string_view text, uint64_t data_size, const std::string& path)
      : c_(text), data_size_(data_size), reader_(data_size, path) {}

  std::optional<Manifest> read(uint16_t major, uint16_t minor, const std::string& path, TensorIndex* index) {
    json doc = json::object();
    bool tensors = false;
    const bool ok = c_.object([&](std::string_view key) {
      if (key == "tensors") return !std::exchange(tensors, true) && c_.array([&] { return entry(); });
      const std::string k(key);
      return !doc.contains(k) && other(1, &doc[k]);
    });
    if (!ok || !c_.at_end() || !tensors) return std::nullopt;
    doc["tensors"] = json::array();  // its entries are in reader_ already
    if (!check_manifest_version(doc, major, minor, path).is_ok()) return std::nullopt;
    auto m = reader_.finish(std::move(doc));
    if (!m.is_ok() || !index->build(m->tensors)) return std::nullopt;  // (build: no name listed twice)
    return std::move(*m);
  }

 private:
  // A value this reader does not read itself, read by the full parser (a repeated key at any
  // depth refused, as the reference reader refuses it); `container`: the nesting it is in.
  bool other(int container, json* out) {
    std::string_view text;
    int depth = 0;
    if (!c_.skip(&text, &depth) || container + depth > kMaxJsonDepth) return false;
    auto v = parse_untrusted_json(text, "manifest");
    if (!v.is_ok()) return false;
    if (out) *out = std::move(*v);
    return true;
  }
  // A key that none of an object's known keys is: `others` holds the ones seen (keys are plain
  // strings here, so their text is their value).
  bool other_member(std::string_view key, std::vector<std::string_view>* others, int container) {
    if (std::find(others->begin(), others->end(), key) != others->end()) return false;
    others->push_back(key);
    return other(container, nullptr);
  }

  // A quantized tensor's params, as nlohmann's parser builds them: plain strings and unsigned
  // integers read here (most of them), any other value by the full parser.
  bool params(json* out) {
    *out = json::object();
    auto& members = out->get_ref<json::object_t&>();
    return c_.object([&](std::string_view key) {
      auto [it, inserted] = members.try_emplace(std::string(key));
      std::string_view s;
      uint64_t u;
      if (!inserted) return false;
      if (c_.string(&s)) it->second = std::string(s);
      else if (c_.uint(&u)) it->second = u;
      else return other(kEntryDepth + 1, &it->second);
      return true;
    });
  }

  bool shape(Dims* d) {
    d->n = 0;
    return c_.array([&] {
      uint64_t v;
      if (d->n == 16 || !c_.uint(&v) || v >= (uint64_t(1) << 48)) return false;
      d->v[d->n++] = v;
      return true;
    });
  }

  bool layout(ListedLayout* l) {
    return c_.object([&](std::string_view key) {
      for (unsigned i = 0; i < 5; ++i) {
        if (key != kLayoutKeys[i]) continue;
        if (!first_time(&l->seen, 1u << i)) return false;
        uint64_t* fields[] = {nullptr, &l->tile_n, &l->tile_k, &l->padded_n, &l->padded_k};
        return i == 0 ? c_.string(&l->kind) : c_.uint(fields[i]);
      }
      return false;
    });
  }

  bool component() {
    ListedComponent& lc = components_.emplace_back();
    unsigned seen = 0;
    return c_.object([&](std::string_view key) {
      if (key == "role") return first_time(&seen, 1) && c_.string(&lc.role);
      if (key == "dtype") return first_time(&seen, 2) && c_.string(&lc.dtype);
      if (key == "shape") return first_time(&seen, 4) && shape(&lc.shape);
      if (key == "offset") return first_time(&seen, 8) && c_.uint(&lc.offset);
      if (key == "bytes") return first_time(&seen, 16) && c_.uint(&lc.bytes);
      if (key == "xxh3") return first_time(&seen, 32) && c_.string(&lc.xxh3);
      return false;
    }) && seen == 63;
  }

  // check_source_record()'s checks; the record is kept as its text, without whitespace.
  bool source(SourceRecord* out) {
    const size_t begin = c_.next_offset();
    unsigned seen = 0;
    std::vector<std::string_view> others;
    const bool ok = c_.object([&](std::string_view key) {
      std::string_view s;
      if (key == "requantized_from") return first_time(&seen, 1) && c_.string(&s);
      if (key == "tensors") return first_time(&seen, 2) && c_.array([&] { return source_part(); });
      return other_member(key, &others, kSourceDepth);
    });
    if (!ok) return false;
    json_without_whitespace(c_.text().substr(begin, c_.offset() - begin), &scratch_);
    *out = SourceRecord::from_text(scratch_);
    return true;
  }

  bool source_part() {
    unsigned seen = 0;
    std::vector<std::string_view> others;
    Dims dims;
    return c_.object([&](std::string_view key) {
      std::string_view s;
      if (key == "role") return first_time(&seen, 1) && c_.string(&s) && source_role_ok(s);
      if (key == "name") return first_time(&seen, 2) && c_.string(&s);
      if (key == "dtype") return first_time(&seen, 4) && c_.string(&s);
      if (key == "shape") return first_time(&seen, 8) && shape(&dims);
      if (key == "file") return first_time(&seen, 16) && c_.string(&s);
      return other_member(key, &others, kSourcePartDepth);
    }) && (seen & 15) == 15;
  }

  bool entry();
  bool check_layout(const ListedLayout& l, TensorDesc* d);

  JsonCursor c_;
  uint64_t data_size_;
  ManifestReader reader_;
  std::vector<ListedComponent> components_;  // the entry's, reused from entry to entry
  std::string scratch_;                      // a source record's text, reused
};

bool FastReader::entry() {
  enum : unsigned { kName = 1, kShape = 2, kDtype = 4, kFormat = 8, kParams = 16, kLayout = 32, kComponents = 64, kSource = 128 };
  unsigned seen = 0;
  std::string_view name, dtype, format;
  Dims dims;
  json params;
  ListedLayout lay;
  SourceRecord record;
  components_.clear();
  const bool ok = c_.object([&](std::string_view key) {
    if (key == "name") return first_time(&seen, kName) && c_.string(&name);
    if (key == "shape") return first_time(&seen, kShape) && shape(&dims);
    if (key == "dtype") return first_time(&seen, kDtype) && c_.string(&dtype);
    if (key == "format") return first_time(&seen, kFormat) && c_.string(&format);
    if (key == "params") return first_time(&seen, kParams) && this->params(&params);
    if (key == "layout") return first_time(&seen, kLayout) && layout(&lay);
    if (key == "components") return first_time(&seen, kComponents) && c_.array([&] { return component(); });
    if (key == "source") return first_time(&seen, kSource) && source(&record);
    return false;
  });
  if (!ok || (seen | kParams | kSource) != 255) return false;

  // desc_from_json()'s checks.
  ArchiveTensor t;
  TensorDesc& d = t.desc;
  d.name = name;
  d.shape.assign(dims.v, dims.v + dims.n);
  const auto dt = dtype_from_archive_name(dtype);
  if (!dt) return false;
  d.dtype = *dt;
  if (auto f = format_from_name(format)) {
    if (!params.is_object()) return false;
    d.format = *f;
    d.params = std::move(params);
  } else if (format != dtype) {
    return false;  // (an unquantized tensor's "params", if listed, are not read)
  }
  // (A plain string has no NUL and is UTF-8, so no name problem can arise here today; the
  // check stays so that a rule added to tensor_name_problem() holds on this path too.)
  if (!check_layout(lay, &d) || tensor_name_problem(d.name)) return false;

  // read_tensor()'s: the components against the descriptor's, each range aligned and inside
  // the data section (the overlap sweep is finish()'s).
  auto specs = component_specs(d);
  if (!specs.is_ok() || specs->size() != components_.size()) return false;
  t.components.reserve(specs->size());
  for (size_t i = 0; i < specs->size(); ++i) {
    ComponentSpec& want = (*specs)[i];
    const ListedComponent& lc = components_[i];
    StoredComponent sc;
    const auto end = checked_add(lc.offset, lc.bytes);
    if (lc.role != role_name(want.role) || lc.dtype != dtype_archive_name(want.dtype) || !(lc.shape == want.shape) ||
        lc.bytes != want.bytes || !parse_hash_hex(lc.xxh3, &sc.xxh3) || lc.offset % kIrisAlignment != 0 || !end ||
        *end > data_size_)
      return false;
    sc.spec = std::move(want);
    sc.offset = lc.offset;
    t.components.push_back(std::move(sc));
  }
  t.source = std::move(record);
  reader_.add_checked(std::move(t));
  return true;
}

bool FastReader::check_layout(const ListedLayout& l, TensorDesc* d) {
  if (!(l.seen & 1)) return false;
  if (l.kind == "row_major") {
    d->layout.kind = LayoutKind::kRowMajor;
  } else if (l.kind == "flat") {
    d->layout.kind = LayoutKind::kFlat;
  } else if (l.kind == "tiled") {
    if ((l.seen & 31) != 31) return false;
    d->layout = {LayoutKind::kTiled, l.tile_n, l.tile_k};
    auto g = matrix_geometry(*d);
    if (!g.is_ok() || g->padded_n != l.padded_n || g->padded_k != l.padded_k) return false;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::optional<Manifest> read_manifest_fast(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                                           const std::string& path, TensorIndex* index) {
  FastReader reader(text, data_size, path);
  return reader.read(major, minor, path, index);
}

}  // namespace iris
