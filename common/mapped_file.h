// A read-only memory map of a whole file.
//
// Sources and archives are read through the map; callers drop pages they are done with
// (release()) so that streaming over a file far larger than memory keeps RSS bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/open_file_cache.h"
#include "common/status.h"

namespace iris {

class MappedFile {
 public:
  // Whether the map keeps its file descriptor for read_at().
  enum class Descriptor {
    // Held open: a long-lived reader (an archive, libiris) goes on reading the file it opened,
    // even if the path is replaced meanwhile. One descriptor per open file.
    kHeld,
    // Closed once mapped; read_at() borrows one from OpenFileCache::shared(), reopening the
    // path and checking it is the same file. For readers of many files at once (a snapshot's
    // shards), which would otherwise exhaust RLIMIT_NOFILE.
    kOnDemand,
  };
  static Result<MappedFile> open(const std::string& path, Descriptor descriptor = Descriptor::kHeld);
  // A view of bytes the caller owns and keeps alive (readers over a memory buffer: the
  // fuzz targets, engines that already hold the archive); `name` stands in for the path.
  static MappedFile borrow(std::span<const uint8_t> bytes, std::string name);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  bool borrowed() const { return borrowed_; }  // a view of the caller's bytes (borrow()), not a file
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return data_; }
  std::span<const uint8_t> bytes(uint64_t offset, uint64_t n) const { return {data_ + offset, size_t(n)}; }

  // Copies [offset, offset+n) into `dst` with pread: for streaming, this is several times
  // faster than touching the map (no per-page faults) and leaves RSS untouched. Thread-safe.
  Status read_at(uint64_t offset, void* dst, uint64_t n) const;

  // Hints the kernel to read [offset, offset+n) ahead, sequentially.
  void will_need(uint64_t offset, uint64_t n) const;
  // How far ahead of a sequential reader to ask for (will_need): with the page cache cold,
  // a reader of 1 MiB preads otherwise waits on the disk for each, at the device's default
  // readahead (issue 26: a lossless convert 1.7x slower than with this, docs/BENCHMARKS.md).
  static constexpr uint64_t kReadAhead = 16ull << 20;
  // Drops [offset, offset+n) from this process's resident set (the page cache keeps it).
  void release(uint64_t offset, uint64_t n) const;

 private:
  std::string path_;
  int fd_ = -1;              // Descriptor::kHeld
  bool on_demand_ = false;   // Descriptor::kOnDemand: read through OpenFileCache::shared()
  FileIdentity identity_;    // as opened, for reopening
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool borrowed_ = false;  // borrow(): not ours to unmap
};

}  // namespace iris
