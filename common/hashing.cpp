#include "common/hashing.h"

#include <xxhash.h>

#include <cstdio>

namespace iris {

uint64_t xxh3_64(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::string hash_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool parse_hash_hex(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = (v << 4) | uint64_t(d);
  }
  *out = v;
  return true;
}

struct StreamingHash::State {
  XXH3_state_t* s = nullptr;
};

StreamingHash::StreamingHash() : state_(new State) {
  state_->s = XXH3_createState();
  XXH3_64bits_reset(state_->s);
}
StreamingHash::~StreamingHash() { XXH3_freeState(state_->s); }
void StreamingHash::update(const void* data, size_t size) { XXH3_64bits_update(state_->s, data, size); }
uint64_t StreamingHash::digest() const { return XXH3_64bits_digest(state_->s); }

}  // namespace iris
