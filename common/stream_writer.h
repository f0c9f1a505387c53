// Writes one ascending run of a file's bytes (an archive's data section) on a thread of its own,
// with direct I/O where the filesystem has it.
//
// Why: converting spent 44% of its CPU time in the kernel copying our pwrite buffers into the
// page cache (perf, docs/BENCHMARKS.md), on the same thread that reads and encodes. Here the
// caller fills 8 MiB page-aligned buffers and a writer thread hands each to the disk, from
// the buffer itself (O_DIRECT: no page-cache copy) while the caller fills the next. Where the
// filesystem refuses O_DIRECT (tmpfs, some network filesystems) the same thread writes
// through the page cache and starts each range's writeback, as before.
//
// Offsets must ascend; gaps read back as zeros. Direct writes cover whole 4 KiB pages, so the
// page holding `start` is written from its beginning (zeros before `start`) and the last one
// to its end: finish() reports the logical end, and the owner truncates the file to it and
// writes whatever lies before `start` afterwards, through the page cache.
//
// Several streams may write one file at once, each its own pages: skip_to() leaves a range of
// whole pages to the others. They then share one DirectIo, since O_DIRECT is a flag of the
// open file, not of a stream.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace iris {

// O_DIRECT on a descriptor while the object lives (when asked for and the filesystem takes it).
class DirectIo {
 public:
  DirectIo(int fd, bool want);
  DirectIo(const DirectIo&) = delete;
  DirectIo& operator=(const DirectIo&) = delete;
  ~DirectIo() { restore(); }

  bool on() const { return on_.load(std::memory_order_relaxed); }
  // A direct write was refused (an alignment larger than a page): the page cache from now on,
  // for every stream of the descriptor. On return the flag is off.
  void give_up();
  // The descriptor's original flags back; false if fcntl failed.
  bool restore();

 private:
  int fd_;
  int original_ = -1;
  std::atomic<bool> on_{false};
  std::mutex mu_;
};

class StreamWriter {
 public:
  struct Options {
    bool direct = true;                  // try O_DIRECT (falls back by itself when refused)
    // 8 MiB: a direct write of it is two of the disk's largest requests (max_sectors_kb 4096 on
    // the virtio disk measured), so, by inference, two in flight where 4 MiB kept one; fp8-block
    // convert, warm, 2-core AMD EPYC: 0.77x the wall time of 3 x 4 MiB (docs/BENCHMARKS.md, issue 26).
    size_t buffer_bytes = size_t(8) << 20;  // per buffer, a multiple of 4 KiB (of 2 MiB: huge pages)
    int buffers = 3;                     // one being filled, the rest in flight or free
    // The descriptor's O_DIRECT, owned by the caller and shared with other streams of the same
    // file; null: the stream sets it itself (per `direct`) and restores it at finish().
    DirectIo* shared_direct = nullptr;
  };

  // `fd` stays owned by the caller and open until finish() or destruction; `what` names the
  // file in messages.
  StreamWriter(int fd, uint64_t start, std::string what, Options options);
  StreamWriter(int fd, uint64_t start, std::string what) : StreamWriter(fd, start, std::move(what), Options{}) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;
  ~StreamWriter();  // stops the thread; whatever was not finished is left to the owner to discard

  // Places `bytes` at file offset `offset` (>= the end of the previous write).
  Status write(uint64_t offset, std::span<const uint8_t> bytes);
  // The same in two steps, for a caller that can produce the bytes in place (a read straight
  // into the buffer saves a copy): room() gives the free part of the current buffer, up to
  // `max` bytes, for bytes starting at `offset` (>= the end of the previous write); commit(n)
  // places the first n of them (n <= the room's size), as write() would have.
  Result<std::span<uint8_t>> room(uint64_t offset, uint64_t max);
  Status commit(uint64_t n);
  // Ends the page holding the current end with zeros and leaves the pages from there up to
  // `offset` (a multiple of 4 KiB, at or past that page's end) to another stream: the next
  // write may start at `offset`.
  Status skip_to(uint64_t offset);
  // File offset of the next byte: the end of the last write (or of a skip).
  uint64_t position() const { return cursor_; }
  // Writes everything up to `end` (>= the last write's end) and stops the thread. The file may
  // then extend past `end` to the next 4 KiB: the owner truncates it. Also restores the file
  // descriptor's flags.
  Status finish(uint64_t end);

  // After finish(): every buffer went to the disk by direct I/O (for tests and reports).
  bool wrote_direct() const { return direct_used_; }

 private:
  struct Buffer {
    uint8_t* data = nullptr;
    uint64_t file_offset = 0;  // of data[0], a multiple of 4 KiB
    size_t used = 0;
  };
  Status append(const uint8_t* src, uint64_t n);  // n bytes at cursor_ (zeros when src is null)
  Status advance_to(uint64_t offset);             // zeros up to `offset` (>= cursor_)
  Status submit_current();
  Status take_free_buffer();
  void run();
  Status write_out(const Buffer& b);

  int fd_;
  std::string what_;
  Options options_;
  std::unique_ptr<DirectIo> own_direct_;  // when not shared
  DirectIo* direct_;
  bool direct_used_ = false;
  uint64_t writeback_from_ = 0;  // page-cache mode: start of the range not yet handed to writeback
  std::vector<uint8_t*> storage_;
  Buffer current_;
  bool have_current_ = false;
  uint64_t cursor_;  // file offset of the next byte; = current_.file_offset + current_.used while have_current_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Buffer> full_;   // to write, in order
  std::deque<uint8_t*> free_;
  bool stopping_ = false;
  Status error_;  // the writer thread's first failure
  std::thread thread_;
};

}  // namespace iris
