// Small helpers that write (possibly malformed) safetensors files and snapshot folders.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace iris::testing_files {

// A fresh folder under /tmp, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char t[] = "/tmp/iris-test-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// 8-byte little-endian length + header + data, exactly as given (no validation).
inline std::string st_bytes(const std::string& header, const std::string& data, uint64_t declared_len = UINT64_MAX) {
  uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

inline void write_st(const std::string& path, const std::string& header, const std::string& data) {
  write_bytes(path, st_bytes(header, data));
}

// The names of a folder's entries, sorted.
inline std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> n;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace iris::testing_files
