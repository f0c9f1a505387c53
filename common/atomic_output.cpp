#include "common/atomic_output.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
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

namespace {

// "NAME.partial-PID-XXXXXX": the PID tells a later run whether the writer is still alive.
std::string partial_prefix(const std::string& final_path) { return final_path + ".partial-"; }

// Removes partial files of `final_path` left by processes that no longer exist (a SIGKILLed
// convert on a filesystem without O_TMPFILE). Only names of exactly our pattern are touched.
void remove_stale_partials(const std::string& final_path) {
  namespace fs = std::filesystem;
  const fs::path target(final_path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = partial_prefix(target.filename().string());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // PID-XXXXXX
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || rest.size() - dash - 1 != 6) continue;
    if (rest.find_first_not_of("0123456789") != dash) continue;
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || (kill(pid_t(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

}  // namespace

namespace {

const char* kind_of(mode_t m) {
  if (S_ISCHR(m)) return "a character device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  return "not a regular file";
}

}  // namespace

Result<AtomicOutputFile::Destination> AtomicOutputFile::destination(const std::string& requested_path, bool overwrite, bool in_order) {
  namespace fs = std::filesystem;
  struct stat link_st{}, st{};
  const bool exists = lstat(requested_path.c_str(), &link_st) == 0;
  if (exists && !overwrite) return already_exists(requested_path + ": already exists");
  Destination d{requested_path, false};
  if (!exists) return d;
  const bool is_link = S_ISLNK(link_st.st_mode);
  if (stat(requested_path.c_str(), &st) != 0) {
    if (is_link) return invalid_argument(requested_path + ": a symbolic link to nothing (" + errno_text() + "); refusing to write through it");
    return io_error(requested_path + ": " + errno_text());
  }
  const std::string what = requested_path + ": is " + kind_of(st.st_mode) + (is_link ? " (through a symbolic link)" : "");
  if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) return invalid_argument(what + "; refusing to write to it");
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    if (!in_order) return invalid_argument(what + "; this output is written out of order and read back, so it goes to a regular file only");
    d.stream = true;
    return d;
  }
  if (is_link) {
    // The rename happens at the file the link resolves to, in that file's folder: the link
    // stays a link, and what it points to gets the new contents.
    std::error_code ec;
    const fs::path target = fs::canonical(requested_path, ec);
    if (ec) return io_error(requested_path + ": cannot resolve the symbolic link: " + ec.message());
    d.path = target.string();
  }
  return d;
}

Result<AtomicOutputFile> AtomicOutputFile::create(const std::string& requested_path, bool overwrite, PartialFileRegistry* registry,
                                                  bool in_order) {
  namespace fs = std::filesystem;
  IRIS_ASSIGN_OR_RETURN(const Destination dest, destination(requested_path, overwrite, in_order));
  if (dest.stream) {
    // Written through: opened as it is (a FIFO waits here for its reader), no O_CREAT, no
    // O_TRUNC, no O_DIRECT; nothing is created beside it.
    AtomicOutputFile f;
    f.final_path_ = requested_path;
    f.partial_path_ = requested_path;
    f.streaming_ = true;
    f.fd_ = ::open(requested_path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (f.fd_ < 0) return io_error(requested_path + ": cannot open it for writing: " + errno_text());
    return f;
  }
  const std::string& final_path = dest.path;
  AtomicOutputFile f;
  f.final_path_ = final_path;
  f.overwrite_ = overwrite;
  remove_stale_partials(final_path);
  // First choice: an unnamed file (O_TMPFILE), linked into the folder on commit. A killed
  // process leaves nothing behind, not even for a signal handler to clean.
  const std::string dir = fs::path(final_path).parent_path().string();
  f.fd_ = ::open(dir.empty() ? "." : dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (f.fd_ >= 0) {
    f.unnamed_ = true;
    f.partial_path_ = final_path + " (unnamed temporary)";
    return f;
  }
  // Elsewhere a named partial beside the destination, removed by the signal handler or, after
  // a SIGKILL, by the next run writing to the same name (below, and above for both paths).
  std::string templ = partial_prefix(final_path) + std::to_string(getpid()) + "-XXXXXX";
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
    unnamed_ = o.unnamed_;
    streaming_ = o.streaming_;
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
    // An unnamed file vanishes with its descriptor; a device or FIFO written through is not ours.
    if (!unnamed_ && !streaming_) unlink(partial_path_.c_str());
    partial_path_.clear();
  }
  if (registry_) registry_->remove(cleanup_slot_);
  cleanup_slot_ = -1;
}

Status AtomicOutputFile::write_at(uint64_t offset, std::span<const uint8_t> data) {
  if (streaming_) return stream_write(offset, data);
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

Status AtomicOutputFile::append(std::span<const uint8_t> data) { return write_at(pos_, data); }

Status AtomicOutputFile::pad_to(uint64_t offset) {
  static const uint8_t kZeros[4096] = {};
  while (pos_ < offset) {
    uint64_t n = std::min<uint64_t>(sizeof kZeros - (pos_ % sizeof kZeros), offset - pos_);
    IRIS_TRY(append({kZeros, size_t(n)}));
  }
  return Status::ok();
}

Status AtomicOutputFile::truncate_to(uint64_t size) {
  if (streaming_) {
    if (size == pos_) return Status::ok();
    return internal_error(final_path_ + ": a device or FIFO cannot be truncated");
  }
  if (ftruncate(fd_, off_t(size)) != 0) return io_error(partial_path_ + ": truncate failed: " + errno_text());
  pos_ = size;
  return Status::ok();
}

Status AtomicOutputFile::commit() {
  if (fd_ < 0) return internal_error("commit of a closed output file");
  if (streaming_) return finish_stream();
  if (ftruncate(fd_, off_t(pos_)) != 0) return io_error(partial_path_ + ": truncate failed: " + errno_text());
  if (fsync(fd_) != 0) return io_error(partial_path_ + ": fsync failed: " + errno_text());
  if (unnamed_) {
    IRIS_TRY(link_unnamed());
  } else {
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

// Devices and FIFOs take bytes in order (pwrite on a FIFO fails with ESPIPE).
Status AtomicOutputFile::stream_write(uint64_t offset, std::span<const uint8_t> data) {
  if (offset != pos_) return internal_error(final_path_ + ": a device or FIFO is written in order; asked to write at " +
                                            std::to_string(offset) + " after " + std::to_string(pos_) + " bytes");
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, std::min<size_t>(left, size_t(1) << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(final_path_ + ": write failed: " + errno_text());
    }
    p += n;
    left -= size_t(n);
  }
  pos_ += data.size();
  return Status::ok();
}

// fsync of a FIFO or of most character devices fails with EINVAL (nothing to make durable):
// not an error of the run. A real failure (EIO of a device that syncs) still is.
Status AtomicOutputFile::finish_stream() {
  if (fsync(fd_) != 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    return io_error(final_path_ + ": fsync failed: " + std::strerror(e));
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  partial_path_.clear();
  if (rc != 0) return io_error(final_path_ + ": close failed: " + errno_text());
  return Status::ok();
}

// Gives the unnamed file its name: linkat never replaces, so without --force that is the
// whole commit; with --force the file is linked under a fresh temporary name and renamed over
// the destination (rename replaces a symlink there, never the file it points to).
Status AtomicOutputFile::link_unnamed() {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
  auto close_fd = [&] {
    ::close(fd_);
    fd_ = -1;
  };
  if (!overwrite_) {
    if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, final_path_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      const int e = errno;
      close_fd();
      if (e == EEXIST) return already_exists(final_path_ + ": appeared while writing; not replaced");
      return io_error(final_path_ + ": cannot link the written file: " + std::strerror(e));
    }
    close_fd();
    return Status::ok();
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string tmp = partial_prefix(final_path_) + std::to_string(getpid()) + "-" + std::to_string(100000 + (std::chrono::steady_clock::now().time_since_epoch().count() + attempt * 7919) % 900000);
    if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      if (errno == EEXIST) continue;
      const int e = errno;
      close_fd();
      return io_error(final_path_ + ": cannot link the written file: " + std::strerror(e));
    }
    close_fd();
    if (rename(tmp.c_str(), final_path_.c_str()) != 0) {
      const int e = errno;
      unlink(tmp.c_str());
      return io_error(final_path_ + ": rename failed: " + std::strerror(e));
    }
    return Status::ok();
  }
  close_fd();
  return io_error(final_path_ + ": no free temporary name to link the written file under");
}

}  // namespace iris
