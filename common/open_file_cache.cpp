#include "common/open_file_cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace iris {

SharedFd::~SharedFd() {
  if (fd_ >= 0) ::close(fd_);
}

size_t OpenFileCache::default_capacity() {
  constexpr size_t kMost = 64;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMost;
  return std::clamp<size_t>(size_t(rl.rlim_cur / 4), 1, kMost);
}

OpenFileCache& OpenFileCache::shared() {
  // The limit as the process first reads. Never destroyed: a MappedFile destroyed during
  // static destruction still forgets its descriptor safely (exit closes them all).
  static OpenFileCache* cache = new OpenFileCache(default_capacity());
  return *cache;
}

size_t OpenFileCache::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void OpenFileCache::drop_idle() {
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->fd.use_count() == 1) {  // only the cache holds it
      where_.erase(it->key);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void OpenFileCache::forget(const FileIdentity& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = where_.find(Key{id.dev, id.ino}); it != where_.end()) {
    lru_.erase(it->second);
    where_.erase(it);
  }
}

Result<std::shared_ptr<const SharedFd>> OpenFileCache::reopen(const std::string& path, const FileIdentity& id) {
  // O_NONBLOCK as MappedFile::open: a path replaced by a FIFO must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    // Out of descriptors (the caller holds many of its own): give back every idle one, once.
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop_idle();
    }
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  }
  if (fd < 0) {
    if (errno == ENOENT) return io_error(path + ": removed while it was being read");
    return io_error(path + ": cannot open it again to read: " + std::strerror(errno));
  }
  auto owned = std::make_shared<const SharedFd>(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return io_error(path + ": cannot stat: " + std::strerror(errno));
  const FileIdentity now{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size)};
  if (!S_ISREG(st.st_mode) || now.dev != id.dev || now.ino != id.ino)
    return io_error(path + ": replaced by another file while it was being read");
  if (now.size != id.size)
    return io_error(path + ": changed while it was being read (" + std::to_string(now.size) + " bytes, was " +
                    std::to_string(id.size) + ")");
  return std::shared_ptr<const SharedFd>(std::move(owned));
}

Result<std::shared_ptr<const SharedFd>> OpenFileCache::acquire(const std::string& path, const FileIdentity& id) {
  const Key key{id.dev, id.ino};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = where_.find(key); it != where_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->fd;
    }
  }
  // Opened outside the lock, so that a slow filesystem does not stall other shards' reads.
  IRIS_ASSIGN_OR_RETURN(std::shared_ptr<const SharedFd> fd, reopen(path, id));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = where_.find(key); it != where_.end()) {  // another thread opened it meanwhile
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->fd;
  }
  lru_.push_front({key, fd});
  where_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    where_.erase(lru_.back().key);
    lru_.pop_back();  // a read still using it keeps it open until it finishes
  }
  return fd;
}

}  // namespace iris
