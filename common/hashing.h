// XXH3-64 checksums, as fixed-width lowercase hex so the manifest's size never depends on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace iris {

uint64_t xxh3_64(const void* data, size_t size);
std::string hash_hex(uint64_t h);                  // always 16 characters
bool parse_hash_hex(std::string_view s, uint64_t* out);

// Incremental XXH3-64 for streamed data.
class StreamingHash {
 public:
  StreamingHash();
  ~StreamingHash();
  StreamingHash(const StreamingHash&) = delete;
  StreamingHash& operator=(const StreamingHash&) = delete;
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace iris
