// An output file that appears under its final name only when complete.
//
// Data goes to an unnamed file in the destination's folder (O_TMPFILE), linked under the
// final name by commit() after an fsync: a process killed even by SIGKILL leaves nothing
// behind. Where the filesystem has no O_TMPFILE, data goes to `DIR/NAME.partial-PID-XXXXXX`
// and commit() renames it; that file is unlinked if the object dies uncommitted or the process
// dies by a signal its owner handles (PartialFileRegistry), and the next run writing NAME
// removes those of processes that no longer exist. Unless overwriting is asked for, an
// existing destination is never replaced (linkat, renameat2 RENAME_NOREPLACE).
//
// With overwriting, what is at the destination decides how (never replacing a non-file by a
// file, nor touching anything but the named file):
// - a regular file is replaced by the rename;
// - a symbolic link is followed: the file it resolves to is replaced, by a rename in that
//   file's folder; the link stays. A link to nothing is refused;
// - a character device or a FIFO (/dev/null, a named pipe, /dev/stdout on a pipe) is written
//   through: opened as it is and streamed into in order, nothing created beside it, no
//   rename; fsync is skipped where the device has none. Outputs that are not written in
//   order (an archive's header goes in last) refuse them;
// - a folder, a block device or a socket is refused.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace iris {

// Where a process that removes partial files on fatal signals keeps their paths (the command
// line installs one: converter/cli/partial_files.h). The library holds no such global itself.
class PartialFileRegistry {
 public:
  virtual ~PartialFileRegistry() = default;
  // Called with all signals blocked; returns a handle for remove() (-1: not registered).
  virtual int add(const std::string& path) = 0;
  virtual void remove(int handle) = 0;
};

class AtomicOutputFile {
 public:
  // Fails if `final_path` exists and !overwrite, or its folder is not writable. The partial
  // file is registered with `registry` (if any) while it exists. `in_order`: the caller
  // writes each byte once, in order (append, pad_to, write_at at position()), so a device or
  // FIFO can take it; otherwise those are refused (kInvalidArgument).
  static Result<AtomicOutputFile> create(const std::string& final_path, bool overwrite, PartialFileRegistry* registry = nullptr,
                                         bool in_order = true);

  // Where create() would write, checked without creating anything (to refuse before long
  // work): `path` is the file to replace (a symbolic link resolved), `stream` a device or
  // FIFO written through. The same errors as create().
  struct Destination {
    std::string path;
    bool stream = false;
  };
  static Result<Destination> destination(const std::string& final_path, bool overwrite, bool in_order);

  AtomicOutputFile() = default;
  AtomicOutputFile(AtomicOutputFile&& o) noexcept { *this = std::move(o); }
  AtomicOutputFile& operator=(AtomicOutputFile&& o) noexcept;
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;
  ~AtomicOutputFile();

  int fd() const { return fd_; }
  const std::string& partial_path() const { return partial_path_; }  // for messages (may describe an unnamed file)
  const std::string& final_path() const { return final_path_; }  // a symbolic link's target once resolved
  bool streaming() const { return streaming_; }                    // writing through to a device or FIFO

  Status write_at(uint64_t offset, std::span<const uint8_t> data);
  Status append(std::span<const uint8_t> data);  // at the current end position
  uint64_t position() const { return pos_; }
  Status pad_to(uint64_t offset);                 // zero-fill up to `offset`
  Status truncate_to(uint64_t size);              // the file's size and end position become `size`

  // fsync + rename into place (+ fsync of the folder). After this the object owns nothing.
  Status commit();
  // Removes the partial file now (also done by the destructor).
  void abandon();

 private:
  int fd_ = -1;
  uint64_t pos_ = 0;
  bool overwrite_ = false;
  std::string final_path_;
  std::string partial_path_;
  int cleanup_slot_ = -1;
  PartialFileRegistry* registry_ = nullptr;
  bool unnamed_ = false;  // O_TMPFILE: no name until commit()
  bool streaming_ = false;
  Status link_unnamed();
  Status stream_write(uint64_t offset, std::span<const uint8_t> data);
  Status finish_stream();
};

}  // namespace iris
