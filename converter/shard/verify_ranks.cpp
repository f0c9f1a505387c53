#include "converter/shard/verify_ranks.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "common/hashing.h"
#include "converter/shard/shard.h"
#include "converter/shard/tensor_slice.h"
#include "formats/iris_archive.h"
#include "formats/tensor_decode.h"
#include "verify/checksums.h"
#include "verify/device_checks.h"

namespace iris {

using nlohmann::json;

json RanksVerifyReport::to_json() const {
  return {{"ok", ok()}, {"world", world}, {"logical_tensors", logical_tensors}, {"boxes", boxes}, {"replicas", replicas},
          {"compared", compared}, {"gpu_checks", gpu_checks}, {"failures", failures}};
}

namespace {

struct Held {
  std::string path;
  IrisArchive archive;
  uint32_t index = 0;
};

// One rank's box of a logical tensor.
struct Piece {
  size_t rank;       // into the held archives
  size_t tensor;     // in that archive's manifest
  std::vector<uint64_t> shape, start, count;
};

class Sink : public ByteSink {
 public:
  Status write(std::span<const uint8_t> b) override {
    out.append(reinterpret_cast<const char*>(b.data()), b.size());
    return Status::ok();
  }
  std::string out;
};

bool u64s(const json& j, std::vector<uint64_t>* out) {
  if (!j.is_array()) return false;
  out->clear();
  for (const auto& v : j) {
    if (!v.is_number_unsigned()) return false;
    out->push_back(v.get<uint64_t>());
  }
  return true;
}

// A field of a record as a file gave it: the type checked, never trusted.
uint64_t u64_or(const json& j, const char* key, uint64_t otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : otherwise;
}
std::string str_or(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
json field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() ? *it : json();
}

bool overlap(const Piece& a, const Piece& b) {
  for (size_t d = 0; d < a.start.size(); ++d)
    if (a.start[d] + a.count[d] <= b.start[d] || b.start[d] + b.count[d] <= a.start[d]) return false;
  return true;
}

// The rank's decode of tensor `rt` against the box of the whole archive's `wt`.
std::string compare_box(const IrisArchive& whole, const ArchiveTensor& wt, const IrisArchive& rank, const ArchiveTensor& rt, const Piece& p) {
  if (wt.desc.format == Format::kRaw) {  // bytes: the box of the whole's data
    Sink box;
    auto sliced = slice_tensor(whole, wt, Box{p.start, p.count});
    if (!sliced.is_ok()) return sliced.status().message();
    if (!sliced->producers[0](box).is_ok()) return "cannot read the whole archive's box";
    const auto mine = rank.bytes(rt.components[0]);
    if (box.out.size() != mine.size() || std::memcmp(box.out.data(), mine.data(), mine.size()) != 0) return "bytes differ from the whole archive's box";
    return "";
  }
  const size_t r = p.shape.size();
  const uint64_t K = p.shape[r - 1], N = r >= 2 ? p.shape[r - 2] : 1;
  const uint64_t n0 = r >= 2 ? p.start[r - 2] : 0, n = r >= 2 ? p.count[r - 2] : 1, k0 = p.start[r - 1], k = p.count[r - 1];
  uint64_t lead = 1, lead0 = 0, inner = 1;  // matrices of the box, first of them, matrices per step of dim 0
  if (r > 2) {
    for (size_t d = 1; d + 2 < r; ++d) inner *= p.shape[d];
    lead = p.count[0] * inner;
    lead0 = p.start[0] * inner;
  }
  const ComponentBytes wc = whole.component_bytes(wt), rc = rank.component_bytes(rt);
  std::vector<float> a(n * K), b(n * k);
  for (uint64_t m = 0; m < lead; ++m) {
    const uint64_t w0 = (lead0 + m) * N + n0;
    if (!decode_rows(wt.desc, wc, w0, w0 + n, DType::kF32, a.data()).is_ok()) return "the whole archive's tensor does not decode";
    if (!decode_rows(rt.desc, rc, m * n, m * n + n, DType::kF32, b.data()).is_ok()) return "does not decode";
    for (uint64_t i = 0; i < n; ++i)
      if (std::memcmp(a.data() + i * K + k0, b.data() + i * k, k * sizeof(float)) != 0)
        return "decode differs from the whole archive's at matrix " + std::to_string(m) + ", row " + std::to_string(n0 + i);
  }
  return "";
}

}  // namespace

Result<RanksVerifyReport> verify_ranks(const RanksVerifyOptions& o) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::error_code ec;
  for (fs::directory_iterator it(o.folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("rank-", 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".iris") == 0) paths.push_back(it->path().string());
  }
  if (ec) return io_error(o.folder + ": cannot list the folder: " + ec.message());
  if (paths.empty()) return invalid_input(o.folder + ": no rank archives (rank-NNNNN-of-NNNNN.iris) in the folder");
  std::sort(paths.begin(), paths.end());
  RanksVerifyReport rep;
  auto fail = [&](const std::string& what) { rep.failures.push_back(what); };
  std::vector<std::unique_ptr<Held>> held;
  json ref;  // the first rank's record, less its own fields
  std::map<uint32_t, std::string> by_index;
  for (const auto& path : paths) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(path));
    const json& rec = a.manifest().rank;
    if (!rec.is_object() || !rec.contains("index") || !rec["index"].is_number_unsigned() || !rec.contains("tensors") ||
        !rec["tensors"].is_array())
      return invalid_input(path + ": not a rank's archive (no rank record)");
    const uint64_t index = rec["index"].get<uint64_t>();
    json common = rec;
    common.erase("index");
    common.erase("tensors");
    if (index > UINT32_MAX) return invalid_input(path + ": rank record: index " + std::to_string(index) + " out of range");
    auto h = std::make_unique<Held>(Held{path, std::move(a), uint32_t(index)});
    if (ref.is_null()) ref = common;
    else if (common != ref) fail(path + ": of another sharding than " + held.front()->path + " (world, tp, ep, source archive or logical tensors differ)");
    if (!by_index.emplace(h->index, path).second) fail(path + ": rank " + std::to_string(h->index) + " is also " + by_index[h->index]);
    // The rank's every byte, as `iris verify` proves an archive: components, embedded files, padding.
    VerifyReport vr;
    verify_checksums(h->archive, &vr, nullptr);
    for (const auto& t : vr.tensors)
      for (const auto& c : t.checks)
        if (!c.ok) fail(path + ": tensor '" + t.name + "': " + c.check + ": " + c.detail);
    for (const auto& c : vr.files)
      if (!c.ok) fail(path + ": embedded file '" + c.check + "': " + c.detail);
    for (const auto& c : vr.archive)
      if (!c.ok) fail(path + ": " + c.check + ": " + c.detail);
    if (o.device == "cuda") {  // every quantized tensor through the GPU dequant, against its CPU reference
      VerifyReport gr;
      IRIS_TRY(run_device_checks(h->archive, &gr));
      for (const auto& t : gr.tensors)
        for (const auto& c : t.checks) {
          if (c.check.rfind("gpu:", 0) == 0) ++rep.gpu_checks;
          if (!c.ok) fail(path + ": tensor '" + t.name + "': " + c.check + ": " + c.detail);
        }
    }
    held.push_back(std::move(h));
  }
  const uint64_t world = u64_or(ref, "world", 0);
  if (world == 0 || world > 65536) return invalid_input(held.front()->path + ": rank record: world missing or out of range");
  rep.world = uint32_t(world);
  const uint64_t tp = u64_or(ref, "tp", 0), ep = u64_or(ref, "ep", 0);
  if (tp != world || ep == 0 || tp % ep != 0)
    fail(held.front()->path + ": rank record: world " + std::to_string(world) + ", tp " + std::to_string(tp) + ", ep " + std::to_string(ep) +
         " (FORMAT.md section 11: the world is tp ranks, and ep divides tp)");
  rep.logical_tensors = u64_or(ref, "logical_tensors", 0);
  for (uint32_t r = 0; r < rep.world; ++r) {
    if (!by_index.count(r)) fail(o.folder + ": " + rank_file_name(r, rep.world) + ": rank " + std::to_string(r) + " of " + std::to_string(rep.world) + " missing");
    else if (fs::path(by_index[r]).filename().string() != rank_file_name(r, rep.world))
      fail(by_index[r] + ": holds rank " + std::to_string(r) + " under another rank's name");
  }
  if (held.size() != rep.world) fail(o.folder + ": " + std::to_string(held.size()) + " rank archives for a world of " + std::to_string(rep.world));

  // Every rank's boxes, by logical tensor; each must describe the tensor its archive holds.
  std::map<std::string, std::vector<Piece>> pieces;
  for (size_t h = 0; h < held.size(); ++h) {
    const auto& tensors = held[h]->archive.manifest().tensors;
    const json& list = held[h]->archive.manifest().rank["tensors"];
    if (list.size() != tensors.size()) {
      fail(held[h]->path + ": its rank record lists " + std::to_string(list.size()) + " tensors, the archive holds " + std::to_string(tensors.size()));
      continue;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      Piece p{h, i, {}, {}, {}};
      const json& e = list[i];
      if (!e.is_object() || str_or(e, "name") != tensors[i].desc.name || !u64s(field(e, "shape"), &p.shape) ||
          !u64s(field(e, "start"), &p.start) || !u64s(field(e, "count"), &p.count) || p.start.size() != p.shape.size() ||
          p.count.size() != p.shape.size() || p.count != tensors[i].desc.shape) {
        fail(held[h]->path + ": tensor '" + tensors[i].desc.name + "': its box in the rank record does not describe the tensor stored");
        continue;
      }
      bool inside = true;
      for (size_t d = 0; d < p.shape.size(); ++d) inside = inside && p.start[d] <= p.shape[d] && p.count[d] <= p.shape[d] - p.start[d];
      if (!inside) {
        fail(held[h]->path + ": tensor '" + tensors[i].desc.name + "': its box lies outside the logical shape");
        continue;
      }
      pieces[tensors[i].desc.name].push_back(std::move(p));
    }
  }
  // Every logical tensor, covered exactly once; identical boxes are replicas with equal bytes.
  std::vector<std::string> names;
  for (const auto& [name, ps] : pieces) {
    names.push_back(name);
    const ArchiveTensor& first = held[ps[0].rank]->archive.manifest().tensors[ps[0].tensor];
    std::vector<const Piece*> distinct;
    for (const auto& p : ps) {
      const ArchiveTensor& t = held[p.rank]->archive.manifest().tensors[p.tensor];
      if (p.shape != ps[0].shape) {
        fail(held[p.rank]->path + ": tensor '" + name + "': logical shape differs from " + held[ps[0].rank]->path + "'s");
        continue;
      }
      if (t.desc.format != first.desc.format || t.desc.dtype != first.desc.dtype) {
        fail(held[p.rank]->path + ": tensor '" + name + "': stored as " + storage_name(t.desc) + ", " + held[ps[0].rank]->path + " as " +
             storage_name(first.desc));
        continue;
      }
      const Piece* same = nullptr;
      for (const Piece* d : distinct)
        if (d->start == p.start && d->count == p.count) same = d;
      if (!same) {
        for (const Piece* d : distinct)
          if (overlap(*d, p)) fail(held[p.rank]->path + ": tensor '" + name + "': its box overlaps that of " + held[d->rank]->path);
        distinct.push_back(&p);
        continue;
      }
      ++rep.replicas;
      const ArchiveTensor& st = held[same->rank]->archive.manifest().tensors[same->tensor];
      bool equal = st.components.size() == t.components.size() && st.desc.format == t.desc.format;
      for (size_t c = 0; equal && c < t.components.size(); ++c) equal = st.components[c].xxh3 == t.components[c].xxh3;
      if (!equal) fail(held[p.rank]->path + ": tensor '" + name + "': a replica whose bytes differ from " + held[same->rank]->path + "'s");
    }
    // Disjoint boxes inside the shape cover it iff their volumes add up to its own (no
    // product or sum here can wrap: an overflow is a failure of its own).
    uint64_t numel = 1, held_elems = 0;
    bool wraps = false;
    for (uint64_t v : ps[0].shape) wraps = wraps || __builtin_mul_overflow(numel, v, &numel);
    for (const Piece* d : distinct) {
      uint64_t v = 1;
      for (uint64_t c : d->count) wraps = wraps || __builtin_mul_overflow(v, c, &v);
      wraps = wraps || __builtin_add_overflow(held_elems, v, &held_elems);
    }
    if (wraps) {
      fail(o.folder + ": tensor '" + name + "': its shape or boxes hold more than 2^64 elements");
      continue;
    }
    rep.boxes += distinct.size();
    if (held_elems != numel)
      fail(o.folder + ": tensor '" + name + "': the ranks hold " + std::to_string(held_elems) + " of its " + std::to_string(numel) + " elements");
  }
  std::sort(names.begin(), names.end());
  StreamingHash nh;
  for (const auto& n : names) nh.update(n.data(), n.size() + 1);
  if (names.size() != rep.logical_tensors || hash_hex(nh.digest()) != str_or(ref, "names_xxh3"))
    fail(o.folder + ": the ranks hold " + std::to_string(names.size()) + " logical tensors, not the " + std::to_string(rep.logical_tensors) +
         " of the source archive (a tensor no rank holds, or one of another archive)");

  if (!o.against.empty()) {
    IRIS_ASSIGN_OR_RETURN(IrisArchive whole, IrisArchive::open(o.against));
    if (hash_hex(whole.preamble().manifest_xxh3) != str_or(ref, "source"))
      fail(o.against + ": not the archive these ranks were cut from (its manifest checksum is not their source's)");
    for (const auto& [name, ps] : pieces) {
      const ArchiveTensor* wt = whole.find(name);
      if (!wt) {
        fail(o.against + ": has no tensor '" + name + "'");
        continue;
      }
      for (const auto& p : ps) {
        const auto& h = *held[p.rank];
        if (p.shape != wt->desc.shape) {
          fail(h.path + ": tensor '" + name + "': logical shape differs from the whole archive's");
          continue;
        }
        const ArchiveTensor& rt = h.archive.manifest().tensors[p.tensor];
        const std::string why = compare_box(whole, *wt, h.archive, rt, p);
        if (!why.empty()) fail(h.path + ": tensor '" + name + "': " + why);
        ++rep.compared;
        // Both tensors' pages out of this process's resident set (the page cache keeps them):
        // proving an archive larger than memory stays bounded by its largest tensor.
        for (const auto& c : rt.components) h.archive.mapping(c).release(h.archive.absolute_offset(c), c.spec.bytes);
      }
      for (const auto& c : wt->components) {
        whole.mapping(c).release(whole.absolute_offset(c), c.spec.bytes);
      }
    }
  }
  return rep;
}

}  // namespace iris
