// Streams an .iris v2 archive to disk, tensor by tensor.
//
// Tensors are described up front (so every offset is known before a byte is written) and
// their components are produced one at a time by callbacks that push bytes into a sink: the
// whole model is never in memory. The file is written as OUT.partial-XXXXXX, checked, fsynced
// and renamed; any failure removes it (common/atomic_output.h).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/status.h"
#include "formats/byte_sink.h"
#include "formats/manifest.h"

namespace iris {


// What a tensor's producers spend: kCompute (decoding and encoding, on every core) or kCopy
// (moving source bytes: a read, a hash, the disk).
enum class ProducerCost { kCompute, kCopy };

// Copies at least this large are written on a stream of their own, beside the computed
// tensors, when the archive has both: the disk then works while the cores encode.
constexpr uint64_t kOverlappedCopyMinBytes = uint64_t(8) << 20;
// What that second stream holds: its three 8 MiB buffers (StreamWriter's default), and a
// copy's 1 MiB read window or a re-tiling copy's 1 MiB of rows and 1 MiB of tiles
// (converter/pipeline/producers.cpp).
constexpr uint64_t kOverlappedCopyStreamBytes = uint64_t(26) << 20;

struct WriteSummary {
  uint64_t file_bytes = 0;
  uint64_t data_bytes = 0;
  uint64_t manifest_bytes = 0;
  uint64_t manifest_xxh3 = 0;  // the preamble's checksum of the manifest (an archive set's index records it)
  std::vector<uint64_t> tensor_bytes;  // each tensor's components, in add_tensor order, late descriptors applied
  // An archive set (write_set): each file's name (member files first, the index last) and size;
  // file_bytes is then their sum.
  std::vector<std::pair<std::string, uint64_t>> set_files;
};

struct WriteOptions {
  bool overwrite = false;
  // Called with (bytes written so far, total bytes) after each chunk.
  std::function<void(uint64_t, uint64_t)> progress;
  // Where the partial file is registered while it exists (the CLI's signal cleanup), if any.
  PartialFileRegistry* partial_files = nullptr;
  // Called when the archive is complete and checked but not yet under its name: what must not
  // outlive a failed write (a report about it) is finished here; an error abandons the archive.
  // It gets the summary write() returns.
  std::function<Status(const WriteSummary&)> before_commit;
  // The data section goes to the disk by direct I/O (no page-cache copy) where the filesystem
  // takes it, else through the page cache (common/stream_writer.h). False: the page cache always.
  bool direct_io = true;
  // Large kCopy tensors written on a second thread and stream, alongside the computed ones
  // (the same bytes either way). False: one stream, in file order.
  bool overlap_copies = true;
  // When set, the complete, checked file is not put under its name but handed over here, still
  // unnamed (or partial): the caller commits it. An archive set names its files together.
  std::vector<AtomicOutputFile>* held = nullptr;
};


// A tensor whose descriptor is final only once its first component is written: an NF4
// tensor's nested offset is the mean of every block's absmax, which its codes producer
// computes in a pass of its own, so that the pass runs while the other tensors are written
// instead of before the first byte. The planned descriptor holds placeholders.
struct LateDesc {
  // Brings the planned descriptor and source record to their final form, in place. Called
  // after the tensor's first component is written, and by planned() (it may then do the work
  // itself). Only params and the source record may change, and of the components only the
  // size of those after the first, each within the pages its planned size took (so no
  // placement moves).
  std::function<Status(TensorDesc&, nlohmann::json& source)> finish;
  // How many bytes longer the final manifest entry may be than the planned one: room kept
  // between the manifest and the data section (FORMAT.md allows the gap; it stays zero).
  uint64_t manifest_room = 0;
};

// A tensor's source record (FORMAT.md section 3) made when the manifest needs it, so that it
// is not held as JSON, about 1 KB, for every tensor until the archive is written (issue 24
// item 10): `make` (required) makes it; `text`, when given, appends what
// append_json_text(make(), depth) would (formats/manifest_entry_text.h) without making the
// JSON, which is how a planned manifest measures 10^6 of them. Both are called while the
// writer lives.
struct SourceRecordMaker {
  std::function<nlohmann::json()> make;
  std::function<void(std::string& out, int depth)> text;
};

class ArchivePlan;

class IrisWriter {
 public:
  // kWrite: the tensors are kept for write() (and planned()). kPlan: each tensor is planned as
  // it is added and let go (formats/archive_plan.h), so that a dry run holds nothing per tensor
  // but its size; only planned() answers, and an error in planning a tensor comes from it.
  enum class Mode { kWrite, kPlan };
  explicit IrisWriter(Mode mode = Mode::kWrite);
  ~IrisWriter();
  IrisWriter(const IrisWriter&) = delete;
  IrisWriter& operator=(const IrisWriter&) = delete;

  void set_model_type(std::string t) { manifest_.model_type = std::move(t); }
  void set_tool(nlohmann::json t) { manifest_.tool = std::move(t); }
  void set_provenance(nlohmann::json p) { manifest_.provenance = std::move(p); }
  // One producer per component of component_specs(desc), in that order. Producers of kCopy
  // tensors may run on another thread than the caller's, concurrently with other tensors'.
  void add_tensor(TensorDesc desc, nlohmann::json source, std::vector<ComponentProducer> producers,
                  ProducerCost cost = ProducerCost::kCompute, LateDesc late = {});
  // The same with the source record made on demand.
  void add_tensor(TensorDesc desc, SourceRecordMaker source, std::vector<ComponentProducer> producers,
                  ProducerCost cost = ProducerCost::kCompute, LateDesc late = {});
  // Embedded small files (config, tokenizer): stored zstd-compressed.
  void add_file(std::string name, std::string bytes);
  // An embedded file already stored (its encoding, sizes and checksum in `meta`, offset
  // ignored): its bytes are written as given, so that a merge does not depend on the zstd
  // version that compressed them.
  void add_stored_file(StoredFile meta, std::string stored);

  // Conversion parts (FORMAT.md section 9). The manifest room write() reserves before the data
  // section for all the tensors added so far, late descriptors' room included: a part records
  // it so that the merge of all parts places the data section where one writer would have.
  Result<uint64_t> manifest_reservation() const;
  // Keeps the tensors [first, end) of those added (a part's share), in order.
  void keep_tensors(size_t first, size_t end);
  // The manifest room write() reserves is at least `bytes` (a merge: the parts' recorded room).
  void reserve_manifest(uint64_t bytes) { reserved_manifest_ = bytes; }
  // The part record (null: a whole archive).
  void set_part(nlohmann::json part) { manifest_.part = std::move(part); }
  // A tensor-parallel rank's record (FORMAT.md section 11; null: none).
  void set_rank(nlohmann::json rank) { manifest_.rank = std::move(rank); }

  Result<WriteSummary> write(const std::string& path, const WriteOptions& options);
  // Writes an archive set (FORMAT.md section 10) instead of one file: the tensors cut, in
  // order, into members of at most `max_file_size` bytes each (formats/archive_set.h), named
  // after `index_path` in its folder, and the index there, holding the embedded files and the
  // set record with `id`. Each member's manifest room is the whole archive's plus the member
  // record's, so that the same tensors give the same members from any writer (a merge of
  // parts included). No file gets its name before all are complete and checked; then the
  // members get theirs, and the index last. A tensor too large for any member is refused,
  // naming it. Consumes the writer's tensors.
  Result<WriteSummary> write_set(const std::string& index_path, uint64_t max_file_size, uint64_t id, const WriteOptions& options);
  // What write() would produce, without writing: the file, data and manifest sizes exactly
  // (the embedded files are compressed to know theirs). For dry runs.
  Result<WriteSummary> planned() const;

 private:
  struct Layout {
    Manifest manifest;                    // offsets placed, checksums still 0
    std::vector<std::string> compressed;  // the embedded files, zstd
    uint64_t total = 0, data_size = 0, data_offset = 0;
    uint64_t manifest_size = 0;  // the most the final manifest may take (its draft plus the late tensors' room)
  };
  Result<Layout> layout() const;
  // The embedded files as stored (zstd), not yet placed; their bytes into `compressed` if given.
  Result<std::vector<StoredFile>> stored_files(std::vector<std::string>* compressed) const;
  struct Pending {
    TensorDesc desc;
    nlohmann::json source;
    SourceRecordMaker maker;  // when maker.make is set, the record (`source` is unused)
    std::vector<ComponentProducer> producers;
    ProducerCost cost = ProducerCost::kCompute;
    LateDesc late;
  };
  static nlohmann::json source_of(const Pending& p) { return p.maker.make ? p.maker.make() : p.source; }
  Manifest manifest_;
  std::vector<Pending> pending_;
  std::vector<std::pair<std::string, std::string>> files_;
  struct PreStored {
    StoredFile meta;
    std::string bytes;
  };
  std::vector<PreStored> stored_;  // add_stored_file(), written after files_
  uint64_t reserved_manifest_ = 0;
  std::unique_ptr<ArchivePlan> plan_;  // Mode::kPlan
  Status plan_status_ = Status::ok();  // the first error planning a tensor (Mode::kPlan)
};

}  // namespace iris
