// A folder created beside another path (NAME.partial-XXXXXX), removed with everything in it
// unless released: partial folder exports, and the intermediate snapshot of an archive source.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace iris {

class TempFolder {
 public:
  static Result<TempFolder> beside(const std::filesystem::path& final_dir) {
    std::filesystem::path parent = final_dir.parent_path();
    if (parent.empty()) parent = ".";
    std::string pattern = (parent / (final_dir.filename().string() + ".partial-XXXXXX")).string();
    if (!mkdtemp(pattern.data())) return io_error(parent.string() + ": cannot create a temporary folder");
    TempFolder t;
    t.path_ = pattern;
    return t;
  }
  TempFolder() = default;
  TempFolder(TempFolder&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

}  // namespace iris
