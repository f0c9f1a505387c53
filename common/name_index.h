// Positions of a table's names, looked up by name: an open-addressing table of 8-byte slots
// (position, hash tag) over names the table itself holds.
//
// Why not std::unordered_map<std::string_view, size_t>: a safetensors file and the snapshot
// over it each indexed their 10^6 names, one 48-byte node allocated per name and freed at exit
// (issue 24 item 10); here a name costs 16 bytes at most and no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hashing.h"

namespace iris {

// NameOf: a callable giving the name at a position (a string_view that stays valid while the
// index is used). Positions are kept in 32 bits: 2^32 - 1 names would be thousands of
// headers at their 10^8-byte cap, more than memory holds; insert() refuses more.
template <typename NameOf>
class NameIndex {
 public:
  static constexpr size_t npos = SIZE_MAX;

  explicit NameIndex(NameOf name_of = {}) : name_of_(std::move(name_of)) {}

  void reserve(size_t n) {
    size_t want = 16;
    while (want < 2 * n) want *= 2;  // load factor at most 1/2
    if (want > slots_.size()) rehash(want);
  }
  // Adds position `i` under its name, unless an equal name is indexed: then nothing is added
  // and that name's position is returned. npos when `i` was added.
  size_t insert(size_t i) {
    if (i >= kEmpty) throw std::length_error("NameIndex: position beyond 32 bits");
    if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const std::string_view name = name_of_(i);
    const uint64_t h = hash(name);
    for (size_t s = h & mask(); ; s = (s + 1) & mask()) {
      Slot& slot = slots_[s];
      if (slot.pos == kEmpty) {
        slot = {uint32_t(i), uint32_t(h >> 32)};
        ++count_;
        return npos;
      }
      if (slot.tag == uint32_t(h >> 32) && name_of_(slot.pos) == name) return slot.pos;
    }
  }
  size_t find(std::string_view name) const { return find(name, name_of_); }
  // The same, with the names read through `name_of` (the table they live in now).
  size_t find(std::string_view name, const NameOf& name_of) const {
    if (slots_.empty()) return npos;
    const uint64_t h = hash(name);
    for (size_t s = h & mask(); ; s = (s + 1) & mask()) {
      const Slot& slot = slots_[s];
      if (slot.pos == kEmpty) return npos;
      if (slot.tag == uint32_t(h >> 32) && name_of(slot.pos) == name) return slot.pos;
    }
  }
  size_t size() const { return count_; }
  // The names now live elsewhere (their table moved): a new accessor, the same positions.
  void rebind(NameOf name_of) { name_of_ = std::move(name_of); }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint32_t pos = kEmpty;
    uint32_t tag = 0;  // the hash's high half: most mismatches end here, without the name
  };
  static uint64_t hash(std::string_view s) { return xxh3_64(s.data(), s.size()); }
  size_t mask() const { return slots_.size() - 1; }
  void rehash(size_t n) {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(n));
    for (const Slot& o : old) {
      if (o.pos == kEmpty) continue;
      size_t s = hash(name_of_(o.pos)) & mask();
      while (slots_[s].pos != kEmpty) s = (s + 1) & mask();
      slots_[s] = o;
    }
  }

  NameOf name_of_;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace iris
