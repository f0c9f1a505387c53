#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>

#include "common/page_size.h"

namespace iris {

Result<MappedFile> MappedFile::open(const std::string& path, Descriptor descriptor) {
  // O_NONBLOCK: opening a FIFO or a device must not wait for a writer (the S_ISREG check below
  // refuses it); it changes nothing for regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    // A missing input reads the same wherever it is opened: an I/O error, "no such file or folder".
    if (errno == ENOENT) return io_error(path + ": no such file or folder");
    return io_error(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_input(path + ": not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = uint64_t(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return io_error(path + ": cannot mmap: " + std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  f.identity_ = {uint64_t(st.st_dev), uint64_t(st.st_ino), f.size_};
  if (descriptor == Descriptor::kHeld) {
    f.fd_ = fd;  // kept for read_at()
  } else {
    ::close(fd);  // the map needs no descriptor; read_at() reopens through the cache
    f.on_demand_ = true;
  }
  return f;
}

MappedFile MappedFile::borrow(std::span<const uint8_t> bytes, std::string name) {
  MappedFile f;
  f.path_ = std::move(name);
  f.data_ = bytes.data();
  f.size_ = bytes.size();
  f.borrowed_ = true;
  return f;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ && !borrowed_) munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    if (on_demand_) OpenFileCache::shared().forget(identity_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    borrowed_ = o.borrowed_;
    on_demand_ = o.on_demand_;
    identity_ = o.identity_;
    o.on_demand_ = false;
    o.fd_ = -1;
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ && !borrowed_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  if (on_demand_) OpenFileCache::shared().forget(identity_);
}

Status MappedFile::read_at(uint64_t offset, void* dst, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) return internal_error(path_ + ": read past the end of the file");
  auto* p = static_cast<uint8_t*>(dst);
  if (borrowed_) {
    if (n) std::memcpy(p, data_ + offset, n);
    return Status::ok();
  }
  if (n == 0) return Status::ok();
  // The borrowed descriptor stays open for the whole read even if the cache evicts it.
  std::shared_ptr<const SharedFd> borrowed;
  int fd = fd_;
  if (on_demand_) {
    IRIS_ASSIGN_OR_RETURN(borrowed, OpenFileCache::shared().acquire(path_, identity_));
    fd = borrowed->get();
  }
  while (n > 0) {
    ssize_t r = pread(fd, p, std::min<uint64_t>(n, uint64_t(1) << 30), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return io_error(path_ + ": read failed at offset " + std::to_string(offset) + ": " + (r < 0 ? std::strerror(errno) : "file shrank"));
    p += r;
    offset += uint64_t(r);
    n -= uint64_t(r);
  }
  return Status::ok();
}

static void page_range(uint64_t offset, uint64_t n, uint64_t size, uint64_t* begin, uint64_t* len) {
  uint64_t b = offset & ~(kPageBytes - 1);
  uint64_t e = std::min(offset + n, size);
  *begin = b;
  *len = e > b ? e - b : 0;
}

void MappedFile::will_need(uint64_t offset, uint64_t n) const {
  if (!data_ || borrowed_) return;
  uint64_t b, len;
  page_range(offset, n, size_, &b, &len);
  if (len) madvise(const_cast<uint8_t*>(data_) + b, len, MADV_WILLNEED);
}

void MappedFile::release(uint64_t offset, uint64_t n) const {
  if (!data_ || borrowed_) return;
  uint64_t b, len;
  page_range(offset, n, size_, &b, &len);
  if (len) madvise(const_cast<uint8_t*>(data_) + b, len, MADV_DONTNEED);
}

}  // namespace iris
