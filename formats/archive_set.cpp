#include "formats/archive_set.h"

#include <cstdio>
#include <filesystem>

#include "common/checked_math.h"
#include "common/hashing.h"
#include "formats/iris_preamble.h"
#include "formats/names.h"

namespace iris {

using nlohmann::json;

namespace {

Status get_u64(const json& j, const char* key, const std::string& ctx, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return invalid_input(ctx + "'" + key + "' missing or not an unsigned integer");
  *out = it->get<uint64_t>();
  return Status::ok();
}

Status get_hash(const json& j, const char* key, const std::string& ctx, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || !parse_hash_hex(it->get<std::string>(), out))
    return invalid_input(ctx + "'" + key + "' missing or not 16 hex digits");
  return Status::ok();
}

}  // namespace

json SetMemberRecord::to_json() const {
  return {{"id", hash_hex(id)}, {"index", index}, {"count", count}, {"first_tensor", first_tensor},
          {"tensors", tensors}, {"total_tensors", total_tensors}};
}

Result<SetMemberRecord> SetMemberRecord::from_json(const json& j, const std::string& what) {
  const std::string ctx = what + ": set member record: ";
  if (!j.is_object()) return invalid_input(what + ": not a member of an archive set (no set_member record)");
  SetMemberRecord r;
  IRIS_TRY(get_hash(j, "id", ctx, &r.id));
  uint64_t index = 0, count = 0;
  IRIS_TRY(get_u64(j, "index", ctx, &index));
  IRIS_TRY(get_u64(j, "count", ctx, &count));
  if (index < 1 || index > count || count > kMaxSetMembers)
    return invalid_input(ctx + "member " + std::to_string(index) + " of " + std::to_string(count) + " is out of range");
  r.index = uint32_t(index);
  r.count = uint32_t(count);
  IRIS_TRY(get_u64(j, "first_tensor", ctx, &r.first_tensor));
  IRIS_TRY(get_u64(j, "tensors", ctx, &r.tensors));
  IRIS_TRY(get_u64(j, "total_tensors", ctx, &r.total_tensors));
  if (r.first_tensor > r.total_tensors || r.tensors > r.total_tensors - r.first_tensor)
    return invalid_input(ctx + "tensors [" + std::to_string(r.first_tensor) + ", +" + std::to_string(r.tensors) +
                         ") lie outside the set's " + std::to_string(r.total_tensors));
  return r;
}

json SetRecord::to_json() const {
  json members = json::array();
  for (const auto& f : files)
    members.push_back({{"name", f.name}, {"bytes", f.bytes}, {"manifest_xxh3", hash_hex(f.manifest_xxh3)},
                       {"first_tensor", f.first_tensor}, {"tensors", f.tensors}});
  return {{"id", hash_hex(id)}, {"tensors", tensors}, {"files", std::move(members)}};
}

Result<SetRecord> SetRecord::from_json(const json& j, const std::string& what) {
  const std::string ctx = what + ": set record: ";
  if (!j.is_object()) return invalid_input(ctx + "not an object");
  SetRecord r;
  IRIS_TRY(get_hash(j, "id", ctx, &r.id));
  IRIS_TRY(get_u64(j, "tensors", ctx, &r.tensors));
  auto files = j.find("files");
  if (files == j.end() || !files->is_array() || files->empty() || files->size() > kMaxSetMembers)
    return invalid_input(ctx + "'files' missing, empty, or longer than " + std::to_string(kMaxSetMembers));
  uint64_t next = 0;
  for (size_t i = 0; i < files->size(); ++i) {
    const json& fj = (*files)[i];
    const std::string fctx = ctx + "files[" + std::to_string(i) + "]: ";
    if (!fj.is_object()) return invalid_input(fctx + "not an object");
    SetFileRecord f;
    auto name = fj.find("name");
    if (name == fj.end() || !name->is_string()) return invalid_input(fctx + "'name' missing or not a string");
    f.name = name->get<std::string>();
    // A plain name in the index's folder: an index must not lead a reader elsewhere.
    if (const char* why = file_name_problem(f.name)) return invalid_input(fctx + "name: " + why);
    for (const auto& other : r.files)
      if (other.name == f.name) return invalid_input(fctx + "'" + f.name + "' is listed twice");
    IRIS_TRY(get_u64(fj, "bytes", fctx, &f.bytes));
    IRIS_TRY(get_hash(fj, "manifest_xxh3", fctx, &f.manifest_xxh3));
    IRIS_TRY(get_u64(fj, "first_tensor", fctx, &f.first_tensor));
    IRIS_TRY(get_u64(fj, "tensors", fctx, &f.tensors));
    if (f.first_tensor != next || f.tensors > r.tensors - std::min(next, r.tensors))
      return invalid_input(fctx + "tensors [" + std::to_string(f.first_tensor) + ", +" + std::to_string(f.tensors) +
                           ") do not follow the members before it (which end at " + std::to_string(next) + ")");
    next += f.tensors;
    r.files.push_back(std::move(f));
  }
  if (next != r.tensors)
    return invalid_input(ctx + "the members hold " + std::to_string(next) + " tensors, the set " + std::to_string(r.tensors));
  return r;
}

std::string set_member_name(const std::string& index_path, uint32_t index, uint32_t count) {
  std::string stem = std::filesystem::path(index_path).filename().string();
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".iris") == 0) stem.resize(stem.size() - 5);
  char buf[48];
  std::snprintf(buf, sizeof buf, "-%05u-of-%05u.iris", index, count);
  return stem + buf;
}

Result<std::vector<std::pair<size_t, size_t>>> plan_set_members(const std::vector<std::vector<uint64_t>>& component_bytes,
                                                                const std::vector<std::string>& names, uint64_t header_bytes,
                                                                uint64_t max_file_size) {
  // A member's file is its header, then each component on a page of its own, the last one
  // unpadded: `pages` is where the next component would start, `end` where the file ends.
  std::vector<std::pair<size_t, size_t>> runs;
  size_t first = 0;
  uint64_t pages = 0, end = 0;
  for (size_t t = 0; t < component_bytes.size(); ++t) {
    uint64_t tp = pages, te = end;
    for (uint64_t b : component_bytes[t])
      if (b) {
        te = tp + b;
        tp = round_up(te, kIrisAlignment);
      }
    if (t > first && header_bytes + te > max_file_size) {  // start a new member with this tensor
      runs.push_back({first, t});
      first = t;
      tp = te = 0;
      for (uint64_t b : component_bytes[t])
        if (b) {
          te = tp + b;
          tp = round_up(te, kIrisAlignment);
        }
    }
    if (header_bytes + te > max_file_size)
      return invalid_input("tensor '" + names[t] + "' takes " + std::to_string(te) + " bytes: a member holding it is " +
                           std::to_string(header_bytes + te) + " bytes with its header, more than the " +
                           std::to_string(max_file_size) + " bytes a file may take");
    pages = tp;
    end = te;
  }
  runs.push_back({first, component_bytes.size()});
  if (runs.size() > kMaxSetMembers)
    return invalid_input("the set would take " + std::to_string(runs.size()) + " files, more than " + std::to_string(kMaxSetMembers));
  return runs;
}

}  // namespace iris
