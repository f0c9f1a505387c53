// libFuzzer target: config.json and model.safetensors.index.json. The input is split at its
// first NUL byte: before it the config, after it the index; beside them a fixed one-tensor
// shard. Written to a private temporary folder, read as a snapshot, grouped.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"

namespace {

std::string folder() {
  static const std::string dir = [] {
    const char* base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string t = std::string(base) + "/iris-fuzz-config-XXXXXX";
    std::string d = mkdtemp(t.data());
    const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    uint64_t n = header.size();
    std::ofstream shard(d + "/s1.safetensors", std::ios::binary);
    shard.write(reinterpret_cast<const char*>(&n), 8);
    shard << header << std::string(8, '\0');
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  const std::string dir = folder();
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  const std::string config(p, nul ? size_t(nul - p) : size);
  std::ofstream(dir + "/config.json", std::ios::binary) << config;
  std::filesystem::remove(dir + "/model.safetensors.index.json");
  if (nul) std::ofstream(dir + "/model.safetensors.index.json", std::ios::binary) << std::string(nul + 1, p + size);
  auto snap = Snapshot::open(dir);
  if (snap.is_ok()) (void)group_source_tensors(*snap);
  return 0;
}
