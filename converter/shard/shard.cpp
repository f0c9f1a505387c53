#include "converter/shard/shard.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/hashing.h"
#include "converter/pipeline/output_guard.h"
#include "formats/iris_archive.h"
#include "formats/iris_writer.h"

namespace iris {

using nlohmann::json;

std::string rank_file_name(uint32_t rank, uint32_t world) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "rank-%05u-of-%05u.iris", rank, world);
  return buf;
}

json ShardReport::to_json() const {
  json f = json::array();
  for (const auto& [path, bytes] : files) f.push_back({{"path", path}, {"bytes", bytes}});
  return {{"ranks", ranks}, {"logical_tensors", logical_tensors}, {"split_tensors", split_tensors},
          {"replicated_tensors", replicated_tensors}, {"replicated_without_rule", unruled}, {"files", f}, {"seconds", seconds}};
}

Result<ShardReport> run_shard(const ShardOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  namespace fs = std::filesystem;
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(o.archive));
  const Manifest& m = a.manifest();
  if (!m.part.is_null() || !m.rank.is_null() || !m.set_member.is_null())
    return invalid_input(o.archive + ": a conversion part, a rank's archive or a set member, not a whole archive");
  IRIS_ASSIGN_OR_RETURN(std::string config, a.read_file("config.json"));
  IRIS_ASSIGN_OR_RETURN(ModelShape shape, model_shape_for_sharding(config, m.model_type, o.spec, o.archive));
  // Each MLP's intermediate dimension is cut where every tensor that it runs through can be cut.
  std::vector<UnitOfTensor> units;
  for (const auto& t : m.tensors) {
    IRIS_ASSIGN_OR_RETURN(const CutUnits u, cut_units(t.desc));
    units.push_back({t.desc.name, t.desc.shape.size(), u.rows, u.columns});
  }
  IRIS_ASSIGN_OR_RETURN(shape.mlp_units, mlp_cut_units(units, o.spec, o.archive));
  const uint32_t world = o.spec.tp;
  // Every rank's file stays open (unnamed) until all are written: a bound on the descriptors.
  if (world > kMaxShardRanks)
    return usage_error("--tp " + std::to_string(world) + ": iris writes at most " + std::to_string(kMaxShardRanks) + " ranks");
  std::error_code ec;
  fs::create_directories(o.output, ec);
  if (ec) return io_error(o.output + ": cannot make the folder: " + ec.message());
  std::vector<std::string> inputs, paths;  // every file of the archive (a set: its index and members)
  for (size_t f = 0; f < a.file_count(); ++f) inputs.push_back(a.file_path(f));
  for (uint32_t r = 0; r < world; ++r) {
    paths.push_back((fs::path(o.output) / rank_file_name(r, world)).string());
    IRIS_TRY(refuse_input_as_output(paths.back(), inputs, "output"));
    IRIS_TRY(AtomicOutputFile::destination(paths.back(), o.overwrite, /*in_order=*/false).status());
  }

  // Every logical tensor, named and counted alike on every rank (verify --ranks checks that
  // the ranks cover them all).
  std::vector<std::string> sorted;
  for (const auto& t : m.tensors) sorted.push_back(t.desc.name);
  std::sort(sorted.begin(), sorted.end());
  StreamingHash names;  // of the names in byte order, each with its NUL (FORMAT.md section 11)
  for (const auto& n : sorted) names.update(n.data(), n.size() + 1);
  ShardReport report;
  report.ranks = world;
  report.logical_tensors = m.tensors.size();
  std::vector<std::vector<RankShare>> shares(world);
  for (const auto& t : m.tensors) {
    bool split = false;
    for (uint32_t r = 0; r < world; ++r) {
      IRIS_ASSIGN_OR_RETURN(RankShare s, rank_share(t.desc.name, t.desc.shape, shape, o.spec, r));
      split = split || s.split || !s.present;
      if (r == 0 && !s.ruled) report.unruled.push_back(t.desc.name);
      shares[r].push_back(std::move(s));
    }
    ++(split ? report.split_tensors : report.replicated_tensors);
  }

  std::vector<AtomicOutputFile> held;
  for (uint32_t r = 0; r < world; ++r) {
    IrisWriter w;
    w.set_model_type(m.model_type);
    w.set_tool(m.tool);
    w.set_provenance(m.provenance);
    json boxes = json::array();
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const ArchiveTensor& t = m.tensors[i];
      const RankShare& s = shares[r][i];
      if (!s.present) continue;
      auto sliced = slice_tensor(a, t, s.box);
      if (!sliced.is_ok()) return sliced.status().with_context(o.archive + ": rank " + std::to_string(r) + " of " + std::to_string(world) + ": ");
      boxes.push_back({{"name", t.desc.name}, {"shape", t.desc.shape}, {"start", s.box.start}, {"count", s.box.count}});
      // A box is not the checkpoint tensor its source record describes: only whole tensors keep it.
      json source = s.box.covers(t.desc.shape) ? t.source.json() : json::object();
      w.add_tensor(std::move(sliced->desc), std::move(source), std::move(sliced->producers), ProducerCost::kCopy);
    }
    for (const auto& f : m.files) {
      const auto b = a.bytes(f);
      w.add_stored_file(f, std::string(reinterpret_cast<const char*>(b.data()), b.size()));
    }
    w.set_rank({{"index", r}, {"world", world}, {"tp", o.spec.tp}, {"ep", o.spec.ep}, {"source", hash_hex(a.preamble().manifest_xxh3)},
                {"logical_tensors", m.tensors.size()}, {"names_xxh3", hash_hex(names.digest())}, {"tensors", std::move(boxes)}});
    WriteOptions wo;
    wo.overwrite = o.overwrite;
    wo.partial_files = o.partial_files;
    wo.direct_io = o.direct_io;
    wo.held = &held;
    if (o.progress) wo.progress = [&o, r, world](uint64_t done, uint64_t all) { o.progress(uint64_t(r) * all + done, uint64_t(world) * all); };
    IRIS_ASSIGN_OR_RETURN(WriteSummary written, w.write(paths[r], wo));
    report.files.push_back({paths[r], written.file_bytes});
  }
  // Every rank complete and checked: named together; a commit that fails takes back the ranks
  // this call named.
  for (size_t i = 0; i < held.size(); ++i) {
    if (Status st = held[i].commit(); !st.is_ok()) {
      for (size_t j = 0; j < i; ++j) fs::remove(paths[j], ec);
      return st;
    }
  }
  // Replacing (--force) a folder of another world's ranks: those would mix with these.
  if (o.overwrite) {
    const std::string mine = rank_file_name(0, world);
    const std::string suffix = mine.substr(mine.find("-of-"));  // "-of-0000N.iris"
    for (fs::directory_iterator it(o.output, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.size() == suffix.size() + 10 && n.rfind("rank-", 0) == 0 && n.find("-of-") == 10 && n.compare(10, suffix.size(), suffix) != 0)
        fs::remove(it->path(), ec);
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace iris
