// Makes a mutated .iris archive's checksums true again, so that a fuzzer's mutations reach
// what the checksums guard (the manifest's validation, the decoders, verify's value checks)
// instead of stopping at the preamble or manifest checksum almost every time. Each component
// and embedded file whose range lies in the data section gets the hash of its bytes (when the
// manifest parses), the manifest is re-serialized and moved so the data section stays
// 4096-aligned, and the manifest and preamble checksums are recomputed. Not an archive
// writer: offsets, sizes and everything else stay as mutated.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hashing.h"

namespace iris::fuzz {

inline uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline void write_u64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// Sets "xxh3" of each object in `list` ("offset", "bytes") to the hash of its data-section bytes.
inline void rehash_ranges(nlohmann::json& list, const uint8_t* data, uint64_t data_size) {
  if (!list.is_array()) return;
  for (auto& r : list) {
    if (!r.is_object()) continue;
    auto off = r.find("offset"), n = r.find("bytes");
    if (off == r.end() || n == r.end() || !off->is_number_unsigned() || !n->is_number_unsigned()) continue;
    const uint64_t o = off->get<uint64_t>(), b = n->get<uint64_t>();
    if (o > data_size || b > data_size - o) continue;
    r["xxh3"] = hash_hex(xxh3_64(data + o, b));
  }
}

inline std::vector<uint8_t> seal_archive(const uint8_t* in, size_t size) {
  std::vector<uint8_t> out(in, in + size);
  if (size < 64 || std::memcmp(in, "IRISMDL", 7) != 0) return out;
  const uint64_t m_off = read_u64(in + 16), m_size = read_u64(in + 24), d_off = read_u64(in + 32), d_size = read_u64(in + 40);
  if (m_off != 64 || m_size > size - 64) return out;
  std::string text(reinterpret_cast<const char*>(in) + 64, m_size);
  const bool data_inside = d_off <= size && d_size <= size - d_off;
  nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  if (data_inside && m.is_object() && !m.is_discarded()) {
    const uint8_t* data = in + d_off;
    if (auto t = m.find("tensors"); t != m.end() && t->is_array())
      for (auto& tensor : *t)
        if (tensor.is_object() && tensor.contains("components")) rehash_ranges(tensor["components"], data, d_size);
    if (auto f = m.find("files"); f != m.end()) rehash_ranges(*f, data, d_size);
    text = m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const uint64_t new_d_off = (64 + text.size() + 4095) / 4096 * 4096;
    out.assign(new_d_off, 0);
    std::memcpy(out.data(), in, 64);
    std::memcpy(out.data() + 64, text.data(), text.size());
    out.insert(out.end(), in + d_off, in + size);
    write_u64(out.data() + 24, text.size());
    write_u64(out.data() + 32, new_d_off);
  }
  write_u64(out.data() + 48, xxh3_64(text.data(), text.size()));
  write_u64(out.data() + 56, xxh3_64(out.data(), 56));
  return out;
}

}  // namespace iris::fuzz
