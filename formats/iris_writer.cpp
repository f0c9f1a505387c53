#include "formats/iris_writer.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "common/atomic_output.h"
#include "common/checked_math.h"
#include "common/hashing.h"
#include "common/stream_writer.h"
#include "formats/iris_preamble.h"
#include "formats/json_limits.h"

namespace iris {

namespace {

// Hashes a component's bytes, checks the producer's byte count, and streams them to the file.
class FileSink final : public ByteSink {
 public:
  FileSink(StreamWriter* out, uint64_t offset, uint64_t expected, const std::string& what,
           const std::function<void(uint64_t)>& on_bytes)
      : out_(out), offset_(offset), expected_(expected), what_(what), on_bytes_(on_bytes) {}

  Status write(std::span<const uint8_t> bytes) override {
    if (written_ + bytes.size() > expected_)
      return internal_error(what_ + ": producer wrote more than the " + std::to_string(expected_) + " planned bytes");
    hash_.update(bytes.data(), bytes.size());
    IRIS_TRY(out_->write(offset_ + written_, bytes));
    written_ += bytes.size();
    if (on_bytes_) on_bytes_(bytes.size());
    return Status::ok();
  }

  Status finish(uint64_t* hash) {
    if (written_ != expected_)
      return internal_error(what_ + ": producer wrote " + std::to_string(written_) + " bytes, planned " + std::to_string(expected_));
    *hash = hash_.digest();
    return Status::ok();
  }

 private:
  StreamWriter* out_;
  uint64_t offset_, expected_;
  std::string what_;
  const std::function<void(uint64_t)>& on_bytes_;
  uint64_t written_ = 0;
  StreamingHash hash_;
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
  auto m = manifest_from_json(j, p.data_size, path);
  if (!m.is_ok()) return internal_error("written manifest does not validate: " + m.status().message());
  return Status::ok();
}

}  // namespace

void IrisWriter::add_tensor(TensorDesc desc, nlohmann::json source, std::vector<ComponentProducer> producers) {
  pending_.push_back({std::move(desc), std::move(source), std::move(producers)});
}

void IrisWriter::add_file(std::string name, std::string bytes) { files_.emplace_back(std::move(name), std::move(bytes)); }

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
    ArchiveTensor t{p.desc, {}, p.source};
    for (auto& s : *specs) t.components.push_back({s, place(s.bytes), 0});
    m.tensors.push_back(std::move(t));
  }
  for (const auto& [name, bytes] : files_) {
    IRIS_ASSIGN_OR_RETURN(std::string z, zstd_compress(bytes, name));
    StoredFile f{name, "zstd", 0, z.size(), bytes.size(), xxh3_64(z.data(), z.size())};
    f.offset = place(f.size);
    m.files.push_back(f);
    l.compressed.push_back(std::move(z));
  }
  for (const auto& t : m.tensors)
    for (const auto& c : t.components) l.total += c.spec.bytes;

  // 2. The manifest's length does not depend on the checksums (fixed-width hex), so the data
  //    section can start right after a draft of it.
  l.manifest_size = manifest_to_json(m).dump(1).size();
  l.data_offset = round_up(kPreambleSize + l.manifest_size, kIrisAlignment);
  return l;
}

Result<WriteSummary> IrisWriter::planned() const {
  IRIS_ASSIGN_OR_RETURN(Layout l, layout());
  return WriteSummary{l.data_offset + l.data_size, l.data_size, l.manifest_size};
}

Result<WriteSummary> IrisWriter::write(const std::string& path, const WriteOptions& options) {
  IRIS_ASSIGN_OR_RETURN(Layout l, layout());
  Manifest& m = l.manifest;
  const uint64_t data_offset = l.data_offset, data_size = l.data_size, total = l.total;
  const std::vector<std::string>& compressed = l.compressed;

  // 3. Stream the components.
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile out, AtomicOutputFile::create(path, options.overwrite, options.partial_files));
  uint64_t done = 0;
  std::function<void(uint64_t)> on_bytes = [&](uint64_t n) {
    done += n;
    if (options.progress) options.progress(done, total);
  };
  {
    // The data section in one ascending stream, written on its own thread (direct I/O where
    // the filesystem allows); the header goes in afterwards, through the page cache.
    StreamWriter::Options so;
    so.direct = options.direct_io;
    StreamWriter stream(out.fd(), data_offset, out.partial_path(), so);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      auto& t = m.tensors[i];
      for (size_t c = 0; c < t.components.size(); ++c) {
        auto& comp = t.components[c];
        FileSink sink(&stream, data_offset + comp.offset, comp.spec.bytes, "tensor '" + t.desc.name + "' " + role_name(comp.spec.role), on_bytes);
        Status s = pending_[i].producers[c](sink);
        if (!s.is_ok()) return s;
        IRIS_TRY(sink.finish(&comp.xxh3));
      }
    }
    for (size_t i = 0; i < m.files.size(); ++i)
      IRIS_TRY(stream.write(data_offset + m.files[i].offset, {reinterpret_cast<const uint8_t*>(compressed[i].data()), compressed[i].size()}));
    IRIS_TRY(stream.finish(data_offset + data_size));
  }
  IRIS_TRY(out.truncate_to(data_offset + data_size));  // direct I/O wrote whole pages

  // 4. Final manifest and preamble, then check what is on disk and publish it.
  const std::string manifest = manifest_to_json(m).dump(1);
  if (manifest.size() != l.manifest_size) return internal_error("manifest size changed between draft and final");
  IRIS_TRY(out.write_at(kPreambleSize, {reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size()}));
  Preamble pre;
  pre.manifest_size = manifest.size();
  pre.data_offset = data_offset;
  pre.data_size = data_size;
  pre.manifest_xxh3 = xxh3_64(manifest.data(), manifest.size());
  auto pre_bytes = encode_preamble(pre);
  IRIS_TRY(out.write_at(0, pre_bytes));
  IRIS_TRY(out.pad_to(data_offset + data_size));
  IRIS_TRY(check_written_header(out.fd(), data_offset, data_offset + data_size, out.partial_path()));
  if (options.before_commit) IRIS_TRY(options.before_commit(data_offset + data_size, data_size, manifest.size()));
  IRIS_TRY(out.commit());
  return WriteSummary{data_offset + data_size, data_size, manifest.size()};
}

}  // namespace iris
