// Rewrites an archive's manifest JSON in place of the old one, with good checksums: how tests
// make hostile archives whose every checksum holds (the new text must fit before the data
// section, which stays where it was).
#pragma once

#include <cstring>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/hashing.h"
#include "tests/test_files.h"

namespace iris::testing_files {

inline void rewrite_manifest(const std::string& from, const std::string& to, const std::function<void(nlohmann::json&)>& edit) {
  std::string b = read_all(from);
  uint64_t msize = 0, doff = 0;
  std::memcpy(&msize, b.data() + 24, 8);
  std::memcpy(&doff, b.data() + 32, 8);
  auto m = nlohmann::json::parse(b.substr(64, msize));
  edit(m);
  const std::string text = m.dump(1);
  ASSERT_LE(64 + text.size(), doff) << "the edited manifest does not fit before the data section";
  b.replace(64, doff - 64, text + std::string(doff - 64 - text.size(), '\0'));
  const uint64_t size = text.size(), mh = xxh3_64(text.data(), text.size());
  std::memcpy(b.data() + 24, &size, 8);
  std::memcpy(b.data() + 48, &mh, 8);
  const uint64_t ph = xxh3_64(b.data(), 56);
  std::memcpy(b.data() + 56, &ph, 8);
  write_bytes(to, b);
}

}  // namespace iris::testing_files
