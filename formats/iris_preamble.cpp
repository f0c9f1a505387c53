#include "formats/iris_preamble.h"

#include <cstring>
#include <string>

#include "common/hashing.h"

namespace iris {

namespace {
template <typename T>
void put(uint8_t* p, T v) { std::memcpy(p, &v, sizeof v); }  // little-endian host
template <typename T>
T get(const uint8_t* p) { T v; std::memcpy(&v, p, sizeof v); return v; }
}  // namespace

// Byte map: 0 magic[8] | 8 u16 major | 10 u16 minor | 12 u32 preamble size | 16 u64 manifest
// offset | 24 u64 manifest size | 32 u64 data offset | 40 u64 data size | 48 u64 manifest xxh3 |
// 56 u64 xxh3 of bytes [0, 56).
std::array<uint8_t, kPreambleSize> encode_preamble(const Preamble& p) {
  std::array<uint8_t, kPreambleSize> b{};
  std::memcpy(b.data(), p.set_index ? kIrisSetMagic.data() : kIrisMagic.data(), 8);
  put<uint16_t>(&b[8], p.version_major);
  put<uint16_t>(&b[10], p.version_minor);
  put<uint32_t>(&b[12], kPreambleSize);
  put<uint64_t>(&b[16], p.manifest_offset);
  put<uint64_t>(&b[24], p.manifest_size);
  put<uint64_t>(&b[32], p.data_offset);
  put<uint64_t>(&b[40], p.data_size);
  put<uint64_t>(&b[48], p.manifest_xxh3);
  put<uint64_t>(&b[56], xxh3_64(b.data(), 56));
  return b;
}

Result<Preamble> decode_preamble(const uint8_t* b, uint64_t file_size, const std::string& path) {
  if (file_size < kPreambleSize)
    return invalid_input(path + ": " + std::to_string(file_size) + " bytes is too short for an .iris archive");
  if (std::memcmp(b, kIrisSetMagic.data(), 8) == 0) {
    if (get<uint64_t>(&b[56]) != xxh3_64(b, 56)) return corrupt_data(path + ": preamble checksum mismatch (corrupt header)");
  } else if (std::memcmp(b, kIrisMagic.data(), 7) != 0) {
    return invalid_input(path + ": not an .iris archive (bad magic)");
  }
  const bool set_index = b[4] == 'S';
  // Another generation digit is "unsupported" only when the preamble checksum vouches for it
  // (a later writer); a damaged magic byte fails the checksum and is corruption. v1 archives
  // (IRISMDL1) have no such checksum and are recognised by their magic alone.
  const bool checksum_ok = get<uint64_t>(&b[56]) == xxh3_64(b, 56);
  if (b[7] != '2' && b[7] != '1' && !(b[7] >= '3' && b[7] <= '9' && checksum_ok))
    return invalid_input(path + ": not an .iris archive (bad magic)");
  if (b[7] == '1')  // the seed engine's format: formats/iris_v1.h reads it, for what takes it
    return unsupported(path + ": a .iris v1 archive (the seed engine's, IRISMDL1), which this reader does not take (it "
                              "reads v2); iris inspect and iris verify read v1");
  if (b[7] != '2')
    return unsupported(path + ": .iris format generation '" + std::string(1, char(b[7])) + "' is not supported (this reader reads v2)");
  if (get<uint64_t>(&b[56]) != xxh3_64(b, 56)) return corrupt_data(path + ": preamble checksum mismatch (corrupt header)");
  Preamble p;
  p.set_index = set_index;
  p.version_major = get<uint16_t>(&b[8]);
  p.version_minor = get<uint16_t>(&b[10]);
  if (p.version_major != kIrisVersionMajor)
    return unsupported(path + ": format version " + std::to_string(p.version_major) + " is not supported");
  if (get<uint32_t>(&b[12]) != kPreambleSize) return invalid_input(path + ": unexpected preamble size");
  p.manifest_offset = get<uint64_t>(&b[16]);
  p.manifest_size = get<uint64_t>(&b[24]);
  p.data_offset = get<uint64_t>(&b[32]);
  p.data_size = get<uint64_t>(&b[40]);
  p.manifest_xxh3 = get<uint64_t>(&b[48]);
  if (p.manifest_offset != kPreambleSize) return invalid_input(path + ": manifest does not follow the preamble");
  if (p.manifest_size == 0 || p.manifest_size > kMaxManifestSize)
    return invalid_input(path + ": manifest size " + std::to_string(p.manifest_size) + " out of range");
  if (p.data_offset % kIrisAlignment != 0 || p.data_offset < p.manifest_offset + p.manifest_size)
    return invalid_input(path + ": data section offset " + std::to_string(p.data_offset) + " is misaligned or overlaps the manifest");
  if (p.data_offset > file_size || p.data_size != file_size - p.data_offset)
    return invalid_input(path + ": data section (" + std::to_string(p.data_offset) + " + " + std::to_string(p.data_size) +
                         " bytes) does not end at the end of the " + std::to_string(file_size) + "-byte file (truncated?)");
  return p;
}

}  // namespace iris
