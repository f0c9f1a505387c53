#include "formats/iris_writer.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/atomic_output.h"
#include "common/checked_math.h"
#include "common/hashing.h"
#include "common/stream_writer.h"
#include "formats/archive_plan.h"
#include "formats/iris_preamble.h"
#include "formats/json_limits.h"

namespace iris {

namespace {

// Hashes a component's bytes, checks the producer's byte count, and streams them to the file.
// Once `cancel` is set (the other stream failed) every write fails, so the producer stops.
class FileSink final : public ByteSink {
 public:
  FileSink(StreamWriter* out, uint64_t offset, uint64_t expected, const std::string& what,
           const std::function<void(uint64_t)>& on_bytes, const std::atomic<bool>& cancel)
      : out_(out), offset_(offset), expected_(expected), what_(what), on_bytes_(on_bytes), cancel_(cancel) {}

  Status write(std::span<const uint8_t> bytes) override {
    if (cancel_.load(std::memory_order_relaxed)) {
      cancelled_ = true;
      return internal_error(what_ + ": abandoned after a failure elsewhere in the archive");
    }
    if (written_ + bytes.size() > expected_)
      return internal_error(what_ + ": producer wrote more than the " + std::to_string(expected_) + " planned bytes");
    hash_.update(bytes.data(), bytes.size());
    IRIS_TRY(out_->write(offset_ + written_, bytes));
    written_ += bytes.size();
    if (on_bytes_) on_bytes_(bytes.size());
    return Status::ok();
  }

  std::span<uint8_t> room(uint64_t max) override {
    if (cancel_.load(std::memory_order_relaxed) || written_ >= expected_) return {};  // write() gives the error
    auto r = out_->room(offset_ + written_, std::min(max, expected_ - written_));
    return r.is_ok() ? *r : std::span<uint8_t>();
  }

  Status commit(std::span<const uint8_t> filled) override {
    hash_.update(filled.data(), filled.size());
    IRIS_TRY(out_->commit(filled.size()));
    written_ += filled.size();
    if (on_bytes_) on_bytes_(filled.size());
    return Status::ok();
  }

  Status finish(uint64_t* hash) {
    if (written_ != expected_)
      return internal_error(what_ + ": producer wrote " + std::to_string(written_) + " bytes, planned " + std::to_string(expected_));
    *hash = hash_.digest();
    return Status::ok();
  }
  bool cancelled() const { return cancelled_; }

 private:
  StreamWriter* out_;
  uint64_t offset_, expected_;
  std::string what_;
  const std::function<void(uint64_t)>& on_bytes_;
  const std::atomic<bool>& cancel_;
  bool cancelled_ = false;
  uint64_t written_ = 0;
  StreamingHash hash_;
};

// Flushes a file to the disk every 100 ms while it lives, on a thread of its own. Why: the disk
// of the machine we measure on keeps direct writes in a cache that only an fsync empties, in
// time proportional to what it holds (0.09-0.11 s for 134 MB, 0.46-0.53 s for 872 MB). Flushed while the
// cores encode, and the disk would otherwise wait, little is left for the final fsync:
// converting to mxfp4 took 0.92x the wall time (nine pairs, docs/BENCHMARKS.md).
class PeriodicFlush {
 public:
  explicit PeriodicFlush(int fd) {
    if (fd >= 0)
      thread_ = std::thread([this, fd] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_; })) {
          lock.unlock();
          fdatasync(fd);  // a failure shows again in the final fsync, which is checked
          lock.lock();
        }
      });
  }
  ~PeriodicFlush() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The tensors one stream writes, in file order, and how it ended.
struct Lane {
  std::vector<size_t> tensors;
  Status status;
  size_t failed_tensor = SIZE_MAX;
  bool cancelled = false;  // it stopped because the other lane failed
};

Result<std::string> zstd_compress(const std::string& in, const std::string& name) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 12);
  if (ZSTD_isError(n)) return internal_error(name + ": zstd compression failed: " + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// Re-reads what is on disk and parses it as a reader would, before the rename.
Status check_written_header(int fd, uint64_t data_offset, uint64_t file_size, const std::string& path) {
  std::vector<uint8_t> head(data_offset);
  if (pread(fd, head.data(), head.size(), 0) != ssize_t(head.size())) return io_error(path + ": cannot re-read the header");
  IRIS_ASSIGN_OR_RETURN(Preamble p, decode_preamble(head.data(), file_size, path));
  std::string_view text(reinterpret_cast<const char*>(head.data()) + p.manifest_offset, p.manifest_size);
  if (xxh3_64(text.data(), text.size()) != p.manifest_xxh3) return internal_error(path + ": manifest checksum mismatch after writing");
  IRIS_ASSIGN_OR_RETURN(auto j, parse_untrusted_json(text, path + ": manifest"));
  auto m = manifest_from_json(std::move(j), p.data_size, path);
  if (!m.is_ok()) return internal_error("written manifest does not validate: " + m.status().message());
  return Status::ok();
}

}  // namespace

IrisWriter::IrisWriter(Mode mode) {
  if (mode == Mode::kPlan) plan_ = std::make_unique<ArchivePlan>();
}

IrisWriter::~IrisWriter() = default;

void IrisWriter::add_tensor(TensorDesc desc, nlohmann::json source, std::vector<ComponentProducer> producers, ProducerCost cost,
                            LateDesc late) {
  if (plan_) {
    if (plan_status_.is_ok()) plan_status_ = plan_->add(ArchiveTensor{std::move(desc), {}, std::move(source)}, producers.size(), late);
    return;
  }
  pending_.push_back({std::move(desc), std::move(source), {}, std::move(producers), cost, std::move(late)});
}

void IrisWriter::add_tensor(TensorDesc desc, SourceRecordMaker source, std::vector<ComponentProducer> producers, ProducerCost cost,
                            LateDesc late) {
  if (!plan_) {
    pending_.push_back({std::move(desc), nullptr, std::move(source), std::move(producers), cost, std::move(late)});
  } else if (!source.text || late.finish) {  // a late descriptor changes the record: it is made
    add_tensor(std::move(desc), source.make(), std::move(producers), cost, std::move(late));
  } else if (plan_status_.is_ok()) {
    plan_status_ = plan_->add(ArchiveTensor{std::move(desc), {}, {}}, producers.size(), late, source.text);
  }
}

namespace {

// An empty range placed after the last byte (an empty tensor last) would lie past the data
// section, which readers refuse: it goes to the section's last aligned offset instead.
void place_empty_ranges(Manifest& m, uint64_t data_size) {
  const uint64_t last_aligned = data_size / kIrisAlignment * kIrisAlignment;
  for (auto& t : m.tensors)
    for (auto& c : t.components)
      if (!c.spec.bytes && c.offset > data_size) c.offset = last_aligned;
  for (auto& f : m.files)
    if (!f.size && f.offset > data_size) f.offset = last_aligned;
}

}  // namespace

namespace {

// The end of the last non-empty range: the data section's size once every size is final.
// Empty ranges placed after it are moved back into the section (place_empty_ranges).
uint64_t data_end(Manifest& m) {
  uint64_t end = 0;
  for (const auto& t : m.tensors)
    for (const auto& c : t.components)
      if (c.spec.bytes) end = std::max(end, c.offset + c.spec.bytes);
  for (const auto& f : m.files)
    if (f.size) end = std::max(end, f.offset + f.size);
  place_empty_ranges(m, end);
  return end;
}

// What a write of manifest `m` (final) amounts to.
WriteSummary summary(const Manifest& m, uint64_t data_offset, uint64_t data_size, uint64_t manifest_bytes) {
  WriteSummary w{data_offset + data_size, data_size, manifest_bytes};
  for (const auto& t : m.tensors) {
    uint64_t bytes = 0;
    for (const auto& c : t.components) bytes += c.spec.bytes;
    w.tensor_bytes.push_back(bytes);
  }
  return w;
}

}  // namespace

void IrisWriter::add_file(std::string name, std::string bytes) { files_.emplace_back(std::move(name), std::move(bytes)); }

void IrisWriter::add_stored_file(StoredFile meta, std::string stored) { stored_.push_back({std::move(meta), std::move(stored)}); }

Result<uint64_t> IrisWriter::manifest_reservation() const {
  if (plan_) return internal_error("manifest_reservation: this writer only plans");
  IRIS_ASSIGN_OR_RETURN(Layout l, layout());
  return l.manifest_size;
}

void IrisWriter::keep_tensors(size_t first, size_t end) {
  end = std::min(end, pending_.size());
  first = std::min(first, end);
  pending_.erase(pending_.begin() + std::ptrdiff_t(end), pending_.end());
  pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(first));
}

Result<IrisWriter::Layout> IrisWriter::layout() const {
  // 1. Plan: every component's place in the data section.
  Layout l;
  Manifest& m = l.manifest;
  m = manifest_;
  m.tensors.clear();
  m.files.clear();
  uint64_t cursor = 0;
  auto place = [&](uint64_t bytes) {
    uint64_t off = cursor;
    if (bytes) {
      cursor = round_up(off + bytes, kIrisAlignment);
      l.data_size = off + bytes;
    }
    return off;
  };
  for (const auto& p : pending_) {
    auto specs = component_specs(p.desc);
    if (!specs.is_ok()) return specs.status();
    if (specs->size() != p.producers.size())
      return internal_error("tensor '" + p.desc.name + "': " + std::to_string(p.producers.size()) + " producers for " +
                            std::to_string(specs->size()) + " components");
    ArchiveTensor t{p.desc, {}, source_of(p)};
    for (auto& s : *specs) t.components.push_back({s, place(s.bytes), 0});
    m.tensors.push_back(std::move(t));
  }
  IRIS_ASSIGN_OR_RETURN(std::vector<StoredFile> files, stored_files(&l.compressed));
  for (StoredFile& f : files) {
    f.offset = place(f.size);
    m.files.push_back(f);
  }
  place_empty_ranges(m, l.data_size);
  for (const auto& t : m.tensors)
    for (const auto& c : t.components) l.total += c.spec.bytes;

  // 2. The manifest's length does not depend on the checksums (fixed-width hex), so the data
  //    section can start right after a draft of it, plus the room late descriptors may take.
  l.manifest_size = manifest_text_size(m);
  for (const auto& p : pending_) l.manifest_size += p.late.manifest_room;
  l.manifest_size = std::max(l.manifest_size, reserved_manifest_);
  l.data_offset = round_up(kPreambleSize + l.manifest_size, kIrisAlignment);
  return l;
}

Result<std::vector<StoredFile>> IrisWriter::stored_files(std::vector<std::string>* compressed) const {
  std::vector<StoredFile> out;
  for (const auto& [name, bytes] : files_) {
    IRIS_ASSIGN_OR_RETURN(std::string z, zstd_compress(bytes, name));
    out.push_back({name, "zstd", 0, z.size(), bytes.size(), xxh3_64(z.data(), z.size())});
    if (compressed) compressed->push_back(std::move(z));
  }
  for (const auto& s : stored_) {
    StoredFile f = s.meta;
    f.offset = 0;
    out.push_back(std::move(f));
    if (compressed) compressed->push_back(s.bytes);
  }
  return out;
}

// One tensor at a time (formats/archive_plan.h), as write() would place and describe them:
// the tensors planned as they came (Mode::kPlan), or now.
Result<WriteSummary> IrisWriter::planned() const {
  if (plan_) {
    IRIS_TRY(plan_status_);
    IRIS_ASSIGN_OR_RETURN(std::vector<StoredFile> files, stored_files(nullptr));
    return plan_->finish(manifest_, files);
  }
  ArchivePlan plan;
  for (const auto& p : pending_) {
    const bool as_text = p.maker.make && p.maker.text && !p.late.finish;  // as add_tensor() plans it
    IRIS_TRY(plan.add(ArchiveTensor{p.desc, {}, as_text ? nullptr : source_of(p)}, p.producers.size(), p.late,
                      as_text ? p.maker.text : nullptr));
  }
  IRIS_ASSIGN_OR_RETURN(std::vector<StoredFile> files, stored_files(nullptr));
  return plan.finish(manifest_, files);
}

Result<WriteSummary> IrisWriter::write(const std::string& path, const WriteOptions& options) {
  if (plan_) return internal_error(path + ": this writer only plans (IrisWriter::Mode::kPlan)");
  IRIS_ASSIGN_OR_RETURN(Layout l, layout());
  Manifest& m = l.manifest;
  const uint64_t data_offset = l.data_offset, total = l.total;
  const std::vector<std::string>& compressed = l.compressed;

  // 3. Stream the components: one stream in file order, or two at once when there are both
  //    large copies and computed tensors (a copy waits on the disk, an encoder on the cores:
  //    alone, each leaves the other idle). Every component starts on a page (kIrisAlignment),
  //    so each page belongs to one stream, and the bytes are the same either way.
  // Not in order (two streams, the header last, then read back): a regular file only.
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile out, AtomicOutputFile::create(path, options.overwrite, options.partial_files, /*in_order=*/false));
  Lane lanes[2];
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    uint64_t bytes = 0;
    for (const auto& c : m.tensors[i].components) bytes += c.spec.bytes;
    const bool big_copy = pending_[i].cost == ProducerCost::kCopy && bytes >= kOverlappedCopyMinBytes;
    lanes[options.overlap_copies && big_copy ? 1 : 0].tensors.push_back(i);
  }
  bool computed = false;
  for (size_t i : lanes[0].tensors) computed = computed || pending_[i].cost == ProducerCost::kCompute;
  if (!computed) {  // nothing to overlap: one stream
    lanes[0].tensors.insert(lanes[0].tensors.end(), lanes[1].tensors.begin(), lanes[1].tensors.end());
    std::sort(lanes[0].tensors.begin(), lanes[0].tensors.end());
    lanes[1].tensors.clear();
  }
  const bool two = !lanes[1].tensors.empty();

  uint64_t done = 0;
  std::mutex progress_mu;
  std::function<void(uint64_t)> on_bytes = [&](uint64_t n) {
    std::lock_guard<std::mutex> lock(progress_mu);
    done += n;
    if (options.progress) options.progress(done, total);
  };
  std::atomic<bool> cancel{false};
  // Writes one lane's components (lanes[0]: and the embedded files, which close the data
  // section). Each non-empty one starts on a page: skip_to() pads the previous one's last page
  // with zeros and passes over the pages of the other lane's tensors in between, if any.
  auto write_lane = [&](Lane& lane, StreamWriter& stream) -> Status {
    for (size_t i : lane.tensors) {
      auto& t = m.tensors[i];
      for (size_t c = 0; c < t.components.size(); ++c) {
        auto& comp = t.components[c];
        const uint64_t at = data_offset + comp.offset;
        Status s = comp.spec.bytes ? stream.skip_to(at) : Status::ok();
        FileSink sink(&stream, at, comp.spec.bytes, "tensor '" + t.desc.name + "' " + role_name(comp.spec.role), on_bytes, cancel);
        if (s.is_ok()) s = pending_[i].producers[c](sink);
        if (s.is_ok()) s = sink.finish(&comp.xxh3);
        if (s.is_ok() && c == 0) s = apply_late_desc(pending_[i].late, t);  // the sizes of the later components final
        if (!s.is_ok()) {
          lane.failed_tensor = i;
          lane.cancelled = sink.cancelled();
          return s;
        }
      }
    }
    if (&lane == &lanes[0])
      for (size_t i = 0; i < m.files.size(); ++i) {
        const uint64_t at = data_offset + m.files[i].offset;
        if (!m.files[i].size) continue;
        IRIS_TRY(stream.skip_to(at));
        IRIS_TRY(stream.write(at, {reinterpret_cast<const uint8_t*>(compressed[i].data()), compressed[i].size()}));
      }
    return Status::ok();
  };
  {
    // Direct I/O where the filesystem allows (a flag of the open file: the streams share it);
    // the header goes in afterwards, through the page cache.
    DirectIo direct(out.fd(), options.direct_io);
    StreamWriter::Options so;
    so.direct = options.direct_io;
    so.shared_direct = &direct;
    auto run_lane = [&](Lane& lane) {
      StreamWriter stream(out.fd(), data_offset, out.partial_path(), so);
      lane.status = write_lane(lane, stream);
      // Each stream up to its own end (never into the other's pages); the data section ends
      // with the last non-empty component, so one of them ends there. The truncation below
      // removes what direct I/O wrote past it.
      if (lane.status.is_ok()) lane.status = stream.finish(stream.position());
      if (!lane.status.is_ok()) cancel = true;
    };
    std::thread copier;
    if (two) copier = std::thread([&] { run_lane(lanes[1]); });
    // Only beside computed tensors: an archive of copies keeps the disk busy without it, and
    // flushes in between slowed it (lossless convert 1.10x the wall time, seven pairs). The
    // page cache has its own writeback (StreamWriter).
    PeriodicFlush flush(direct.on() && computed ? out.fd() : -1);
    run_lane(lanes[0]);
    if (copier.joinable()) copier.join();
    // The first real failure in file order (not a lane stopped because of the other's).
    const Lane* failed = nullptr;
    auto rank = [](const Lane& l) { return std::pair(l.cancelled, l.failed_tensor); };
    for (const Lane& l : lanes)
      if (!l.status.is_ok() && (!failed || rank(l) < rank(*failed))) failed = &l;
    if (failed) return failed->status;
    if (!direct.restore()) return io_error(out.partial_path() + ": cannot leave direct I/O");
  }
  const uint64_t data_size = data_end(m);  // l.data_size unless a late descriptor changed the last range's size
  IRIS_TRY(out.truncate_to(data_offset + data_size));  // direct I/O wrote whole pages

  // 4. Final manifest and preamble, then check what is on disk and publish it.
  const std::string manifest = manifest_to_json(m).dump(1);
  if (manifest.size() > l.manifest_size) return internal_error("the manifest outgrew the room planned for it");
  IRIS_TRY(out.write_at(kPreambleSize, {reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size()}));
  Preamble pre;
  pre.set_index = !m.set.is_null();
  pre.version_minor = manifest_minor_version(m);
  pre.manifest_size = manifest.size();
  pre.data_offset = data_offset;
  pre.data_size = data_size;
  pre.manifest_xxh3 = xxh3_64(manifest.data(), manifest.size());
  auto pre_bytes = encode_preamble(pre);
  IRIS_TRY(out.write_at(0, pre_bytes));
  IRIS_TRY(out.pad_to(data_offset + data_size));
  IRIS_TRY(check_written_header(out.fd(), data_offset, data_offset + data_size, out.partial_path()));
  WriteSummary written = summary(m, data_offset, data_size, manifest.size());
  written.manifest_xxh3 = pre.manifest_xxh3;
  if (options.before_commit) IRIS_TRY(options.before_commit(written));
  if (options.held) {
    options.held->push_back(std::move(out));
    return written;
  }
  IRIS_TRY(out.commit());
  return written;
}

}  // namespace iris
