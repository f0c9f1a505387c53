// Looking up `org/name[@revision]` in the Hugging Face hub cache (FORMATS.md 1.6).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "converter/sources/snapshot.h"

namespace iris {

namespace fs = std::filesystem;

std::string hf_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return (fs::path(h) / "hub").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : "/") / ".cache" / "huggingface" / "hub").string();
}

bool looks_like_repo_id(const std::string& s) {
  static const std::regex re(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9._/-]+)?$)");
  return std::regex_match(s, re) && s.find("..") == std::string::npos;
}

Result<std::string> resolve_hf_repo_id(const std::string& repo_id) {
  std::string id = repo_id, revision = "main";
  if (auto at = id.find('@'); at != std::string::npos) {
    revision = id.substr(at + 1);
    id = id.substr(0, at);
  }
  const std::string cache = hf_cache_dir();
  std::string dir_name = "models--" + id;
  for (size_t p; (p = dir_name.find('/')) != std::string::npos;) dir_name.replace(p, 1, "--");
  const fs::path repo = fs::path(cache) / dir_name;
  std::error_code ec;
  // A repo id that is not here is a missing input, like a missing path: exit 5, not 3.
  if (!fs::is_directory(repo, ec))
    return io_error(repo_id + ": not a file or folder here, and not in the Hugging Face cache (looked for " + repo.string() +
                    "; `hf download " + id + (revision == "main" ? "" : " --revision " + revision) + "` fetches it)");
  std::string commit;
  const fs::path ref = repo / "refs" / revision;
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream in(ref);
    std::getline(in, commit);
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    static const std::regex hex40("^[0-9a-f]{40}$");
    if (!std::regex_match(commit, hex40))
      return invalid_input(ref.string() + ": does not hold a 40-hex commit id");
  } else if (std::regex_match(revision, std::regex("^[0-9a-f]{40}$"))) {
    commit = revision;
  } else {
    return io_error(repo_id + ": revision '" + revision + "' is not in the cache (no " + ref.string() + "; `hf download " + id +
                    " --revision " + revision + "` fetches it)");
  }
  const fs::path snap = repo / "snapshots" / commit;
  if (!fs::is_directory(snap, ec))
    return io_error(repo_id + ": snapshot " + commit + " is not in the cache (no " + snap.string() + ")");
  return snap.string();
}

}  // namespace iris
