#include "converter/exports/folder_output.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace iris {

namespace fs = std::filesystem;

namespace {

// The process's umask without changing it (umask() sets it, a race with other threads
// creating files): Linux reports it in /proc/self/status since 4.7; else the common 022.
mode_t current_umask() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Umask:", 0) == 0) return mode_t(std::strtoul(line.c_str() + 6, nullptr, 8) & 0777);
  return 022;
}

bool is_weights_file(const std::string& name) { return name.ends_with(".safetensors") || name == "model.safetensors.index.json"; }

}  // namespace

Result<FolderDestination> folder_destination(const std::string& output, bool overwrite, const std::vector<std::string>& inputs) {
  fs::path dir = output;
  if (dir.filename().empty()) dir = dir.parent_path();  // "DIR/"
  std::error_code ec;
  FolderDestination d{dir, fs::exists(dir, ec)};
  if (!d.exists) return d;
  if (!fs::is_directory(dir, ec)) return invalid_argument(dir.string() + ": exists and is not a folder; refusing to replace it with one");
  d.dir = fs::canonical(dir, ec);
  if (ec) return io_error(dir.string() + ": cannot resolve it: " + ec.message());
  for (const auto& in : inputs) {
    std::error_code e;
    const fs::path p = fs::canonical(in, e);
    if (e) continue;
    // Resolved paths, compared by whole components: "d" holds "d/x" and "d/sub/x", not "dd/x".
    auto [end_dir, end_p] = std::mismatch(d.dir.begin(), d.dir.end(), p.begin(), p.end());
    if (end_dir == d.dir.end())
      return invalid_argument("output folder '" + dir.string() + "' " + (p == d.dir ? "is" : "holds") + " the input '" + in +
                              "'; refusing to write into it");
  }
  if (!overwrite) return already_exists(dir.string() + ": exists");
  return d;
}

Status refuse_stale_weights(const FolderDestination& d, const std::set<std::string>& names) {
  if (!d.exists) return Status::ok();
  std::error_code ec;
  for (fs::directory_iterator it(d.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_weights_file(name) && !names.count(name))
      return invalid_argument(d.dir.string() + ": holds '" + name +
                              "', which this export does not write: transformers would load it with the new weights or instead of "
                              "them; refusing (remove it, or export into another folder)");
  }
  if (ec) return io_error(d.dir.string() + ": cannot list it: " + ec.message());
  return Status::ok();
}

Status publish_folder(const fs::path& tmp, const FolderDestination& d) {
  const mode_t mask = current_umask();
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) files.push_back(it->path());
  if (ec) return io_error(tmp.string() + ": cannot list it: " + ec.message());
  for (const auto& f : files)
    if (::chmod(f.c_str(), 0644 & ~mask) != 0) return io_error(f.string() + ": chmod failed: " + std::strerror(errno));
  if (!d.exists) {
    if (::chmod(tmp.c_str(), 0755 & ~mask) != 0) return io_error(tmp.string() + ": chmod failed: " + std::strerror(errno));
    fs::rename(tmp, d.dir, ec);
    if (ec) return io_error(d.dir.string() + ": cannot rename the export into place: " + ec.message());
    return Status::ok();
  }
  // Into the existing folder, file by file: a rename replaces only an entry of the same name
  // (a symbolic link there is replaced itself, never what it points to).
  for (const auto& f : files) {
    const fs::path to = d.dir / f.filename();
    if (std::rename(f.c_str(), to.c_str()) != 0) return io_error(to.string() + ": cannot rename the exported file into place: " + std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace iris
