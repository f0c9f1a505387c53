// The fixed 64-byte little-endian preamble of an .iris v2 archive (FORMAT.md section 2).
#pragma once

#include <array>
#include <cstdint>

#include "common/status.h"

namespace iris {

constexpr std::array<char, 8> kIrisMagic = {'I', 'R', 'I', 'S', 'M', 'D', 'L', '2'};
// An archive set's index (FORMAT.md section 10): the same preamble under another magic, so
// that a reader older than sets refuses the index instead of reading it as an archive without
// tensors.
constexpr std::array<char, 8> kIrisSetMagic = {'I', 'R', 'I', 'S', 'S', 'E', 'T', '2'};
constexpr uint16_t kIrisVersionMajor = 2;
constexpr uint16_t kIrisVersionMinor = 0;
constexpr uint32_t kPreambleSize = 64;
constexpr uint64_t kIrisAlignment = 4096;
constexpr uint64_t kMaxManifestSize = 256ull << 20;

struct Preamble {
  uint16_t version_major = kIrisVersionMajor;
  uint16_t version_minor = kIrisVersionMinor;
  uint64_t manifest_offset = kPreambleSize;
  uint64_t manifest_size = 0;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
  uint64_t manifest_xxh3 = 0;
  bool set_index = false;  // the magic is kIrisSetMagic
};

std::array<uint8_t, kPreambleSize> encode_preamble(const Preamble& p);
// Validates magic, version, the preamble's own checksum and the section bounds against
// `file_size`. `path` names the file in errors.
Result<Preamble> decode_preamble(const uint8_t* bytes, uint64_t file_size, const std::string& path);

}  // namespace iris
