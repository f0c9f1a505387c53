// Where `export -o DIR/` puts its folder, and how. A new DIR is written under a temporary
// name beside it and renamed into place. An existing DIR (overwrite only) keeps everything
// but the files of the names the export writes, each replaced by a rename: it once was
// replaced whole, losing whatever else it held (the archive being exported included).
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace iris {

struct FolderDestination {
  std::filesystem::path dir;  // the folder to write (an existing one resolved: symbolic links, "..")
  bool exists = false;
};

// kAlreadyExists when DIR exists and !overwrite; kInvalidArgument when it exists and is not a
// folder, or is or holds (at any depth) one of `inputs`.
Result<FolderDestination> folder_destination(const std::string& dir, bool overwrite, const std::vector<std::string>& inputs);

// kInvalidArgument when an existing DIR holds weights the export would not replace
// (`*.safetensors`, `model.safetensors.index.json` outside `names`): transformers would load
// them with the new files, or instead of them.
Status refuse_stale_weights(const FolderDestination& d, const std::set<std::string>& names);

// Moves the complete folder `tmp` (files only) into place, after giving the new folder mode
// 0755 and its files 0644, less the umask (mkdtemp made it 0700: unreadable to a serving
// account). On failure nothing in an existing DIR was removed, though some files may already
// be the new ones.
Status publish_folder(const std::filesystem::path& tmp, const FolderDestination& d);

}  // namespace iris
