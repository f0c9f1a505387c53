#include "common/stream_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/page_size.h"

namespace iris {

namespace {

constexpr uint64_t kWritebackChunk = 32ull << 20;  // page-cache mode: writeback every 32 MiB
constexpr size_t kHugePageBytes = size_t(2) << 20;

// A write buffer: on whole 2 MiB transparent huge pages where its size allows (and the kernel
// takes the advice), else on 4 KiB pages. Why: a conversion's buffers are fresh memory, and on
// 4 KiB pages their first faults and zeroing cost more CPU than the larger buffers saved in
// wall time (run 2026-11-28, fp8-block warm: 4 x 16 MiB 1.48x the CPU time of 3 x 4 MiB; on
// huge pages 0.71x the CPU time of the same buffers on small pages).
uint8_t* allocate_buffer(size_t bytes) {
  const bool huge = bytes % kHugePageBytes == 0;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(huge ? kHugePageBytes : kPageBytes, bytes));
#ifdef MADV_HUGEPAGE
  if (p && huge) (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages if refused
#endif
  return p;
}

std::string errno_message() { return std::strerror(errno); }

}  // namespace

DirectIo::DirectIo(int fd, bool want) : fd_(fd) {
  original_ = fcntl(fd_, F_GETFL);
  if (want && original_ >= 0 && fcntl(fd_, F_SETFL, original_ | O_DIRECT) == 0) on_ = true;
}

void DirectIo::give_up() {
  std::lock_guard<std::mutex> lock(mu_);  // a second stream refused at once waits for the first's fcntl
  if (on_.exchange(false)) fcntl(fd_, F_SETFL, original_);
}

bool DirectIo::restore() {
  std::lock_guard<std::mutex> lock(mu_);
  return !on_.exchange(false) || fcntl(fd_, F_SETFL, original_) == 0;
}

StreamWriter::StreamWriter(int fd, uint64_t start, std::string what, Options options)
    : fd_(fd), what_(std::move(what)), options_(options), cursor_(start) {
  options_.buffer_bytes = std::max<size_t>(kPageBytes, options_.buffer_bytes / kPageBytes * kPageBytes);
  options_.buffers = std::max(2, options_.buffers);
  for (int i = 0; i < options_.buffers; ++i) {
    uint8_t* p = allocate_buffer(options_.buffer_bytes);
    if (!p) {
      error_ = io_error(what_ + ": cannot allocate the write buffers");
      break;
    }
    storage_.push_back(p);
    free_.push_back(p);
  }
  if (options_.shared_direct) {
    direct_ = options_.shared_direct;
  } else {
    own_direct_ = std::make_unique<DirectIo>(fd_, options_.direct);
    direct_ = own_direct_.get();
  }
  writeback_from_ = start;
  // The first buffer begins at the page holding `start`.
  current_.file_offset = start / kPageBytes * kPageBytes;
  thread_ = std::thread([this] { run(); });
}

StreamWriter::~StreamWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    full_.clear();  // an unfinished stream is discarded by the owner: do not write the rest
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  own_direct_.reset();  // the descriptor's flags back
  for (uint8_t* p : storage_) std::free(p);
}

Status StreamWriter::take_free_buffer() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !free_.empty() || !error_.is_ok(); });
  if (!error_.is_ok()) return error_;
  current_.data = free_.front();
  free_.pop_front();
  have_current_ = true;
  // The buffer starts at file_offset, a page boundary; bytes before cursor_ in it (only in
  // the first buffer: the head of the page holding `start`) are zeros.
  current_.used = cursor_ - current_.file_offset;
  std::memset(current_.data, 0, current_.used);
  return Status::ok();
}

Status StreamWriter::submit_current() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.is_ok()) return error_;
    full_.push_back(current_);
  }
  cv_.notify_all();
  have_current_ = false;
  current_.file_offset += options_.buffer_bytes;
  return Status::ok();
}

Status StreamWriter::append(const uint8_t* src, uint64_t n) {
  while (n > 0) {
    if (!have_current_) IRIS_TRY(take_free_buffer());
    const uint64_t k = std::min<uint64_t>(n, options_.buffer_bytes - current_.used);
    if (src) {
      std::memcpy(current_.data + current_.used, src, k);
      src += k;
    } else {
      std::memset(current_.data + current_.used, 0, k);
    }
    current_.used += k;
    cursor_ += k;
    n -= k;
    if (current_.used == options_.buffer_bytes) IRIS_TRY(submit_current());
  }
  return Status::ok();
}

Status StreamWriter::advance_to(uint64_t offset) {
  if (offset < cursor_) return internal_error(what_ + ": stream write at " + std::to_string(offset) + " before the end of the previous one");
  return append(nullptr, offset - cursor_);  // the gap reads back as zeros
}

Status StreamWriter::write(uint64_t offset, std::span<const uint8_t> bytes) {
  IRIS_TRY(advance_to(offset));
  return append(bytes.data(), bytes.size());
}

Result<std::span<uint8_t>> StreamWriter::room(uint64_t offset, uint64_t max) {
  IRIS_TRY(advance_to(offset));
  if (!have_current_) IRIS_TRY(take_free_buffer());
  return std::span<uint8_t>(current_.data + current_.used, std::min<uint64_t>(max, options_.buffer_bytes - current_.used));
}

Status StreamWriter::commit(uint64_t n) {
  if (!have_current_ || n > options_.buffer_bytes - current_.used) return internal_error(what_ + ": commit of more than the room given");
  current_.used += n;
  cursor_ += n;
  if (current_.used == options_.buffer_bytes) IRIS_TRY(submit_current());
  return Status::ok();
}

Status StreamWriter::skip_to(uint64_t offset) {
  const uint64_t page_end = (cursor_ + kPageBytes - 1) / kPageBytes * kPageBytes;
  if (offset % kPageBytes != 0 || offset < page_end)
    return internal_error(what_ + ": stream skip to " + std::to_string(offset) + ", not a page boundary at or after " + std::to_string(page_end));
  IRIS_TRY(append(nullptr, page_end - cursor_));
  if (offset == page_end) return Status::ok();
  if (have_current_ && current_.used > 0) IRIS_TRY(submit_current());  // whole pages: used is a multiple of 4 KiB
  cursor_ = offset;
  current_.file_offset = offset;
  return Status::ok();
}

Status StreamWriter::finish(uint64_t end) {
  if (end > cursor_) IRIS_TRY(append(nullptr, end - cursor_));
  if (have_current_ && current_.used > 0) {
    // Whole pages for direct I/O: zeros after the end, truncated away by the owner.
    const uint64_t padded = (current_.used + kPageBytes - 1) / kPageBytes * kPageBytes;
    std::memset(current_.data + current_.used, 0, padded - current_.used);
    current_.used = padded;
    IRIS_TRY(submit_current());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  direct_used_ = direct_->on();
  if (own_direct_ && !own_direct_->restore()) return io_error(what_ + ": cannot leave direct I/O: " + errno_message());
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void StreamWriter::run() {
  for (;;) {
    Buffer b;
    bool failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !full_.empty() || stopping_; });
      if (full_.empty()) return;  // stopping, nothing left
      b = full_.front();
      full_.pop_front();
      failed = !error_.is_ok();
    }
    Status s = failed ? Status::ok() : write_out(b);  // after a failure, buffers only go back
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.is_ok() && error_.is_ok()) error_ = s;
      free_.push_back(b.data);
    }
    cv_.notify_all();
  }
}

Status StreamWriter::write_out(const Buffer& b) {
  const uint8_t* p = b.data;
  uint64_t left = b.used, off = b.file_offset;
  bool refused = false;
  while (left > 0) {
    ssize_t n = pwrite(fd_, p, left, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && !refused) {
      // The filesystem took O_DIRECT but refuses these writes (alignment it wants larger than
      // a page): the rest goes through the page cache.
      refused = true;
      direct_->give_up();
      continue;
    }
    if (n <= 0) return io_error(what_ + ": write failed: " + (n < 0 ? errno_message() : std::string("no progress")));
    p += n;
    left -= uint64_t(n);
    off += uint64_t(n);
  }
  if (!direct_->on() && off - writeback_from_ >= kWritebackChunk) {
    // Hand finished ranges to writeback now, so the final fsync has little left to do.
    sync_file_range(fd_, off_t(writeback_from_), off_t(off - writeback_from_), SYNC_FILE_RANGE_WRITE);
    writeback_from_ = off;
  }
  return Status::ok();
}

}  // namespace iris
