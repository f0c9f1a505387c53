#include "formats/iris_v1.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "common/checked_math.h"
#include "common/file_magic.h"

namespace iris {

namespace {

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (as everything in iris)
}
uint64_t u64_at(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

bool is_iris_v1_archive(const std::string& path) { return file_starts_with(path, kIrisV1Magic); }

const char* v1_dtype_name(V1DType d) {
  switch (d) {
    case V1DType::kBF16: return "bf16";
    case V1DType::kF32: return "f32";
    case V1DType::kU8: return "u8";
    case V1DType::kI32: return "i32";
  }
  return "?";
}

uint64_t v1_dtype_bytes(V1DType d) { return d == V1DType::kBF16 ? 2 : d == V1DType::kU8 ? 1 : 4; }

Result<V1Archive> V1Archive::open(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  return from_map(std::move(map));
}

Result<V1Archive> V1Archive::open_memory(std::span<const uint8_t> bytes, const std::string& name) {
  return from_map(MappedFile::borrow(bytes, name));
}

Result<V1Archive> V1Archive::from_map(MappedFile map) {
  const std::string& file = map.path();
  const uint64_t size = map.size();
  const uint8_t* d = map.data();
  auto bad = [&](const std::string& what) { return corrupt_data(file + ": " + what); };
  if (size < kV1HeaderBytes || std::memcmp(d, kIrisV1Magic.data(), kIrisV1Magic.size()) != 0)
    return bad("not a .iris v1 archive (no IRISMDL1 header)");
  const uint32_t version = u32_at(d + 8), count = u32_at(d + 12);
  if (version != 1) return unsupported(file + ": .iris v1 header with version " + std::to_string(version) + " (only 1 exists)");
  const auto table = checked_add(kV1HeaderBytes, uint64_t(count) * kV1EntryBytes);
  if (!table || *table > size)
    return bad("the tensor table (" + std::to_string(count) + " entries of 216 bytes) runs past the end of the file (" + std::to_string(size) +
               " bytes)");
  V1Archive a;
  a.entries_.reserve(count);
  std::unordered_set<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = d + kV1HeaderBytes + uint64_t(i) * kV1EntryBytes;
    V1Entry t;
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(e, 0, kV1NameBytes));
    const size_t len = nul ? size_t(nul - e) : kV1NameBytes;
    t.name.assign(reinterpret_cast<const char*>(e), len);
    t.name_full = len == kV1NameBytes;
    const std::string who = "tensor " + std::to_string(i) + (len ? " '" + t.name + "'" : "");
    if (len == 0) return bad(who + ": empty name");
    for (size_t j = len; j < kV1NameBytes; ++j)
      if (e[j] != 0) return bad(who + ": bytes after the name's NUL are not zero (a damaged table)");
    t.offset = u64_at(e + 128);
    t.nbytes = u64_at(e + 136);
    const uint32_t dtype = u32_at(e + 144), ndim = u32_at(e + 148);
    if (dtype > 3) return bad(who + ": unknown dtype code " + std::to_string(dtype) + " (v1 has 0 bf16, 1 f32, 2 uint8, 3 int32)");
    t.dtype = V1DType(dtype);
    if (ndim > kV1MaxDims) return bad(who + ": " + std::to_string(ndim) + " dims (v1 holds at most 8)");
    for (uint32_t k = 0; k < kV1MaxDims; ++k) {
      const uint64_t dim = u64_at(e + 152 + 8 * k);
      if (k < ndim) t.shape.push_back(dim);
      else if (dim != 0) return bad(who + ": dim " + std::to_string(k) + " is " + std::to_string(dim) + " past ndim " + std::to_string(ndim));
    }
    const auto numel = checked_numel(t.shape);
    const auto want = numel ? checked_mul(*numel, v1_dtype_bytes(t.dtype)) : std::nullopt;
    if (!want) return bad(who + ": shape too large");
    if (*want != t.nbytes)
      return bad(who + ": " + std::to_string(t.nbytes) + " bytes, but its shape and dtype " + v1_dtype_name(t.dtype) + " need " +
                 std::to_string(*want));
    const auto end = checked_add(t.offset, t.nbytes);
    if (!end || *end > size)
      return bad(who + ": its blob [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) + ") runs past the end of the file (" +
                 std::to_string(size) + " bytes)");
    if (t.nbytes && t.offset < *table) return bad(who + ": its blob starts at " + std::to_string(t.offset) + ", inside the tensor table");
    if (!names.insert(t.name).second)
      return bad(who + ": name used twice" + (t.name_full ? " (v1 truncates names at 128 bytes, so two long names can collide)" : ""));
    a.entries_.push_back(std::move(t));
  }
  std::vector<const V1Entry*> by_offset;
  for (const auto& t : a.entries_)
    if (t.nbytes) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const V1Entry* x, const V1Entry* y) { return x->offset < y->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      return bad("tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  a.map_ = std::move(map);
  return a;
}

const V1Entry* V1Archive::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> V1Archive::check_conventions() const {
  std::vector<std::string> out;
  const uint8_t* d = map_.data();
  const uint64_t header = round_up(table_end(), kV1HeaderAlign);
  auto zero = [&](uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to && i < map_.size(); ++i)
      if (d[i] != 0) return false;
    return true;
  };
  if (!zero(table_end(), header)) out.push_back("the header's padding to 4096 bytes is not zero");
  uint64_t pos = header;  // the writer's blobs follow in table order, each 256-aligned
  for (const auto& e : entries_) {
    const uint64_t want = round_up(pos, kV1BlobAlign);
    if (e.offset != want) {
      out.push_back("tensor '" + e.name + "' starts at " + std::to_string(e.offset) + ", not at " + std::to_string(want) +
                    " (table order, 256-byte alignment)");
      return out;
    }
    if (!zero(pos, e.offset)) out.push_back("the fill before tensor '" + e.name + "' is not zero");
    pos = e.offset + e.nbytes;
  }
  if (pos != map_.size()) out.push_back(std::to_string(map_.size() - std::min(pos, map_.size())) + " bytes after the last tensor");
  return out;
}

}  // namespace iris
