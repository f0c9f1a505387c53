#include "common/atomic_output.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace iris {

namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Result<AtomicOutputFile> AtomicOutputFile::create(const std::string& final_path, bool overwrite, PartialFileRegistry* registry) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(fs::symlink_status(final_path, ec)))
    return already_exists(final_path + ": already exists");
  if (fs::is_directory(final_path, ec)) return invalid_argument(final_path + ": is a folder");
  AtomicOutputFile f;
  f.final_path_ = final_path;
  f.overwrite_ = overwrite;
  std::string templ = final_path + ".partial-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  // Signals wait while the file is created and registered: one landing in between would
  // find a partial file the handler does not know about, and leave it behind.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  f.fd_ = mkostemp(buf.data(), O_CLOEXEC);
  const int create_errno = errno;
  if (f.fd_ >= 0) {
    f.partial_path_ = buf.data();
    if (registry) f.cleanup_slot_ = registry->add(f.partial_path_);
    f.registry_ = registry;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = create_errno;
  if (f.fd_ < 0) return io_error(final_path + ": cannot create a temporary file beside it: " + errno_text());
  fchmod(f.fd_, 0644);
  return f;
}

AtomicOutputFile& AtomicOutputFile::operator=(AtomicOutputFile&& o) noexcept {
  if (this != &o) {
    abandon();
    fd_ = o.fd_;
    pos_ = o.pos_;
    overwrite_ = o.overwrite_;
    final_path_ = std::move(o.final_path_);
    partial_path_ = std::move(o.partial_path_);
    cleanup_slot_ = o.cleanup_slot_;
    registry_ = o.registry_;
    o.fd_ = -1;
    o.cleanup_slot_ = -1;
    o.partial_path_.clear();
  }
  return *this;
}

AtomicOutputFile::~AtomicOutputFile() { abandon(); }

void AtomicOutputFile::abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!partial_path_.empty()) {
    unlink(partial_path_.c_str());
    partial_path_.clear();
  }
  if (registry_) registry_->remove(cleanup_slot_);
  cleanup_slot_ = -1;
}

Status AtomicOutputFile::write_at(uint64_t offset, std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = pwrite(fd_, p, std::min<size_t>(left, size_t(1) << 30), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(partial_path_ + ": write failed: " + errno_text());
    }
    p += n;
    left -= size_t(n);
    offset += uint64_t(n);
  }
  pos_ = std::max(pos_, offset);
  return Status::ok();
}

void AtomicOutputFile::start_writeback(uint64_t offset, uint64_t n) {
  if (fd_ >= 0 && n > 0) sync_file_range(fd_, off_t(offset), off_t(n), SYNC_FILE_RANGE_WRITE);
}

Status AtomicOutputFile::append(std::span<const uint8_t> data) { return write_at(pos_, data); }

Status AtomicOutputFile::pad_to(uint64_t offset) {
  static const uint8_t kZeros[4096] = {};
  while (pos_ < offset) {
    uint64_t n = std::min<uint64_t>(sizeof kZeros - (pos_ % sizeof kZeros), offset - pos_);
    IRIS_TRY(append({kZeros, size_t(n)}));
  }
  return Status::ok();
}

Status AtomicOutputFile::commit() {
  if (fd_ < 0) return internal_error("commit of a closed output file");
  if (ftruncate(fd_, off_t(pos_)) != 0) return io_error(partial_path_ + ": truncate failed: " + errno_text());
  if (fsync(fd_) != 0) return io_error(partial_path_ + ": fsync failed: " + errno_text());
  if (::close(fd_) != 0) {
    fd_ = -1;
    return io_error(partial_path_ + ": close failed: " + errno_text());
  }
  fd_ = -1;
  int rc;
  if (overwrite_) {
    rc = rename(partial_path_.c_str(), final_path_.c_str());
  } else {
    rc = int(syscall(SYS_renameat2, AT_FDCWD, partial_path_.c_str(), AT_FDCWD, final_path_.c_str(), RENAME_NOREPLACE));
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      // Filesystem without RENAME_NOREPLACE: link() also refuses to replace.
      rc = link(partial_path_.c_str(), final_path_.c_str());
      if (rc == 0) unlink(partial_path_.c_str());
    }
  }
  if (rc != 0) {
    if (errno == EEXIST) return already_exists(final_path_ + ": appeared while writing; not replaced");
    return io_error(final_path_ + ": rename failed: " + errno_text());
  }
  partial_path_.clear();
  if (registry_) registry_->remove(cleanup_slot_);
  cleanup_slot_ = -1;
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(final_path_).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

}  // namespace iris
