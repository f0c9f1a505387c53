// Archive sets (FORMAT.md section 10, version 2.2): one archive as a small index file plus
// numbered member files, each member a valid archive of a contiguous run of the tensors, so
// that no file passes a size limit (the Hugging Face Hub takes 50 GB a file). This file holds
// the two records that tie a set together, their schemas, the members' names, and how a
// writer cuts the tensors into members.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace iris {

constexpr uint32_t kMaxSetMembers = 99999;  // five digits in the members' names
// Room the member record takes in a member's manifest beyond what the whole archive's manifest
// reserves (the record is about 150 bytes; a member lists no embedded files, which the whole
// archive's manifest does).
constexpr uint64_t kSetMemberRecordRoom = 512;

// In each member: which set it belongs to and its place there.
struct SetMemberRecord {
  uint64_t id = 0;  // the set's id (the conversion's plan fingerprint, FORMAT.md section 9)
  uint32_t index = 0, count = 0;  // 1-based
  uint64_t first_tensor = 0, tensors = 0, total_tensors = 0;
  nlohmann::json to_json() const;
  static Result<SetMemberRecord> from_json(const nlohmann::json& j, const std::string& what);
};

// In the index: every member, pinned by its size and its manifest's checksum (which covers
// every component's checksum, so the member's every byte).
struct SetFileRecord {
  std::string name;  // a plain file name, in the index's folder
  uint64_t bytes = 0, manifest_xxh3 = 0, first_tensor = 0, tensors = 0;
};
struct SetRecord {
  uint64_t id = 0;
  uint64_t tensors = 0;
  std::vector<SetFileRecord> files;
  nlohmann::json to_json() const;
  // Checks the schema and that the members' runs join and cover `tensors`.
  static Result<SetRecord> from_json(const nlohmann::json& j, const std::string& what);
};

// The name of member `index` of `count` for the index file `index_path`: its file name less a
// final ".iris", then "-00001-of-00004.iris" (the numbering of sharded safetensors).
std::string set_member_name(const std::string& index_path, uint32_t index, uint32_t count);

// How a writer cuts tensors into members: in order, each member takes tensors while its file
// (`header_bytes`: the preamble, manifest room and padding before its data section, then each
// tensor's components, each starting on a page) stays within `max_file_size`. `component_bytes`
// holds each tensor's component sizes. Returns the runs [first, end). A tensor too large for a
// member of its own is refused, naming it (`names`).
Result<std::vector<std::pair<size_t, size_t>>> plan_set_members(const std::vector<std::vector<uint64_t>>& component_bytes,
                                                                const std::vector<std::string>& names, uint64_t header_bytes,
                                                                uint64_t max_file_size);

}  // namespace iris
