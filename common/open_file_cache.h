// A small, bounded, thread-safe cache of read-only file descriptors, opened again on demand.
//
// A snapshot may have more shards than the process may hold open files (RLIMIT_NOFILE, often
// 1024). Its shards are mapped and planned once, their descriptors closed (a memory map holds
// none); reads then borrow a descriptor from here. Conversions read shards in order, so a
// least-recently-used cache of a few dozen keeps every hot shard open and reopens each cold
// one about once. Reopening checks that the path still names the file that was planned.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace iris {

// What makes a reopened path the same file: device, inode and size as first opened.
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  bool operator==(const FileIdentity&) const = default;
};

// One open descriptor, closed when its last holder (the cache, or a read in flight after
// the cache evicted it) lets go.
class SharedFd {
 public:
  explicit SharedFd(int fd) : fd_(fd) {}
  SharedFd(const SharedFd&) = delete;
  SharedFd& operator=(const SharedFd&) = delete;
  ~SharedFd();
  int get() const { return fd_; }

 private:
  int fd_;
};

class OpenFileCache {
 public:
  // At most min(64, a quarter of the soft RLIMIT_NOFILE) idle descriptors, leaving the rest
  // of the process's allowance to its outputs, reads in flight and the caller.
  static size_t default_capacity();
  // The process's one cache (every reader shares the allowance).
  static OpenFileCache& shared();

  explicit OpenFileCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // A descriptor of the file `path` named when `id` was taken. A path that now names another
  // file, or the file at another size, is an error naming the path.
  Result<std::shared_ptr<const SharedFd>> acquire(const std::string& path, const FileIdentity& id);

  // Drops the cached descriptor of `id` (a read in flight keeps it until done): its owner is
  // done with the file, and a deleted temporary's space must not stay allocated behind a
  // cached descriptor.
  void forget(const FileIdentity& id);

  size_t capacity() const { return capacity_; }
  size_t cached() const;  // descriptors the cache holds now (tests)

 private:
  struct Key {
    uint64_t dev, ino;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.dev * 0x9e3779b97f4a7c15ull ^ k.ino); }
  };
  struct Entry {
    Key key;
    std::shared_ptr<const SharedFd> fd;
  };
  Result<std::shared_ptr<const SharedFd>> reopen(const std::string& path, const FileIdentity& id);
  void drop_idle();  // with mu_ held: closes every descriptor no read is using

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> where_;
};

}  // namespace iris
