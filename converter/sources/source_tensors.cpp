#include "converter/sources/source_tensors.h"

#include "converter/sources/checkpoint_schemes.h"
#include "converter/sources/quant_scheme.h"
#include "converter/sources/schemes/scheme_helpers.h"

#include <cstring>
#include <filesystem>
#include <algorithm>
#include <unordered_set>

#include "common/checked_math.h"
#include "formats/iris_archive.h"
#include "formats/json_limits.h"
#include "formats/manifest_entry_text.h"

namespace iris {

using nlohmann::json;

namespace {

using schemes::shape_str;
using schemes::where;

}  // namespace

std::optional<DType> dtype_from_torch_name(const std::string& name) {
  std::string n = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  if (n == "bfloat16") return DType::kBF16;
  if (n == "float16" || n == "half") return DType::kF16;
  if (n == "float32" || n == "float") return DType::kF32;
  return std::nullopt;
}

const SourcePart* SourceTensor::part(Role role) const {
  for (const auto& p : parts)
    if (p.role == role) return &p;
  return nullptr;
}

json SourceTensor::source_json() const {
  if (recorded_source) return recorded_source->json();
  json parts_j = json::array();
  for (const auto& p : parts)
    parts_j.push_back({{"role", p.label ? p.label : role_name(p.role)},
                       {"name", p.ref.tensor->name},
                       {"file", p.ref.file->file_name()},
                       {"dtype", std::string(dtype_st_name(p.ref.tensor->dtype))},
                       {"shape", p.ref.tensor->shape}});
  return {{"tensors", parts_j}};
}

void SourceTensor::append_source_text(std::string& out, int depth) const {
  if (recorded_source) return append_json_text(out, recorded_source->json(), depth);
  // source_json()'s keys in the order nlohmann's sorted objects write them.
  JsonMembers record(out, depth, '{');
  record.key("tensors");
  append_json_list(out, parts, record.inner(), [&](const SourcePart& p, int inner) {
    JsonMembers e(out, inner, '{');
    e.key("dtype");
    append_json_string(out, dtype_st_name(p.ref.tensor->dtype));
    e.key("file");
    append_json_string(out, p.ref.file->file_name());
    e.key("name");
    append_json_string(out, p.ref.tensor->name);
    e.key("role");
    append_json_string(out, p.label ? p.label : role_name(p.role));
    e.key("shape");
    append_json_uints(out, p.ref.tensor->shape, e.inner());
    e.close('}');
  });
  record.close('}');
}

namespace {

// An archive source's tensors, one each, as the archive stores them (Snapshot::open_archive).
Result<std::vector<SourceTensor>> archive_source_tensors(const Snapshot& snap) {
  std::vector<SourceTensor> out;
  out.reserve(snap.stored_tensors().size());
  std::shared_ptr<const IrisArchive> archive = snap.archive();
  for (const auto& stored : snap.stored_tensors()) {
    const ArchiveTensor& held = archive->manifest().tensors[stored.index];
    SourceTensor t;
    t.desc = held.desc;
    for (const auto& [role, ref] : stored.components) {
      SourcePart part{role, ref, std::nullopt};
      if (held.desc.layout.kind == LayoutKind::kTiled && role == Role::kCodes) {
        IRIS_ASSIGN_OR_RETURN(MatrixGeometry g, matrix_geometry(held.desc));
        part.tiled = TiledCodes{g, held.desc.layout};
      }
      t.parts.push_back(std::move(part));
    }
    t.recorded_source = held.source;
    const size_t index = stored.index;
    t.check = std::make_shared<CheckOnce>([archive, index] { return archive->verify_tensor(archive->manifest().tensors[index]); });
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<std::vector<SourceTensor>> group_source_tensors(const Snapshot& snap, const GroupingOptions& options) {
  if (snap.archive()) return archive_source_tensors(snap);
  // The declared scheme first, then companions that only other schemes write: such a
  // checkpoint is refused by its scheme's name, before a tensor-level symptom is met.
  IRIS_TRY(check_quantization_scheme(snap));
  for (const auto& st : snap.tensors())
    if (std::string scheme = undecoded_scheme_of(snap, st.tensor->name); !scheme.empty())
      return unsupported(where(st) + "a companion of " + scheme + ", a quantization scheme iris does not decode");
  std::unordered_set<std::string> consumed;
  std::vector<SourceTensor> out;
  std::vector<size_t> position;  // of out[i]'s primary tensor (its codes) in the snapshot
  // Pass 1: each tensor that starts a group of a scheme (checkpoint_schemes.h) makes the group;
  // a tensor a group already holds starts none (whichever of a group's tensors the file lists
  // first, the group is made once, by the first scheme in the table that claims it).
  for (size_t i = 0; i < snap.tensors().size(); ++i) {
    const SnapshotTensor& st = snap.tensors()[i];
    if (consumed.count(st.tensor->name)) continue;
    for (const auto* scheme : checkpoint_schemes()) {
      if (!scheme->decoded) continue;
      const std::string weight = scheme->group_of(snap, st.tensor->name);
      if (weight.empty()) continue;
      IRIS_ASSIGN_OR_RETURN(SourceTensor t, scheme->group(snap, st, weight, options));
      for (const auto& p : t.parts) consumed.insert(p.ref.tensor->name);
      position.push_back(size_t(snap.find(t.parts[0].ref.tensor->name) - snap.tensors().data()));
      out.push_back(std::move(t));
      break;
    }
  }
  // Pass 2: companions nobody claimed are orphans; the rest are raw tensors.
  for (size_t i = 0; i < snap.tensors().size(); ++i) {
    const SnapshotTensor& st = snap.tensors()[i];
    const std::string& name = st.tensor->name;
    if (consumed.count(name)) continue;
    for (const auto* scheme : checkpoint_schemes())
      if (scheme->decoded) IRIS_TRY(scheme->check_unclaimed(snap, st, options));
    SourceTensor t;
    t.desc.name = name;
    t.desc.shape = st.tensor->shape;
    t.desc.dtype = st.tensor->dtype;
    t.desc.format = Format::kRaw;
    t.parts = {{Role::kData, st}};
    out.push_back(std::move(t));
    position.push_back(i);
  }
  // Archive order follows the snapshot's (shard, offset) order of each primary tensor, so
  // conversion reads the shards sequentially. (A snapshot of raw tensors only is in that order
  // already: its 10^6 tensors are then not moved into a second list.)
  std::vector<SourceTensor> sorted;
  if (std::is_sorted(position.begin(), position.end())) {
    sorted = std::move(out);
  } else {
    std::vector<std::pair<size_t, size_t>> order(out.size());  // (snapshot position, index in out)
    for (size_t i = 0; i < out.size(); ++i) order[i] = {position[i], i};
    std::sort(order.begin(), order.end());
    sorted.reserve(out.size());
    for (const auto& [pos, i] : order) sorted.push_back(std::move(out[i]));
  }
  for (auto& t : sorted) {
    // Every logical tensor must be one an archive can describe: the grouped shape (K of an
    // MXFP4 stack is 32x its blocks' third dimension) within the format's dimension limit.
    for (uint64_t d : t.desc.shape)
      if (d >= (uint64_t(1) << 48))
        return invalid_input(where(t.parts[0].ref) + "logical shape " + shape_str(t.desc.shape) + " has a dimension of 2^48 or more");
  }
  return sorted;
}

}  // namespace iris
