#include "converter/pipeline/parts.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "common/hashing.h"
#include "converter/sources/snapshot.h"
#include "formats/json_text.h"
#include "formats/manifest.h"

namespace iris {

Result<PartSpec> parse_part_spec(std::string_view text) {
  const auto bad = [&] {
    return usage_error("--part '" + std::string(text) + "': expected I/N, the part's number and the number of parts, 1 <= I <= N <= " +
                       std::to_string(kMaxParts) + " (e.g. 2/4)");
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  PartSpec p;
  const auto number = [](std::string_view s, uint32_t* out) {
    if (s.empty() || s.size() > 6) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (!number(text.substr(0, slash), &p.index) || !number(text.substr(slash + 1), &p.count)) return bad();
  if (p.index < 1 || p.count < 1 || p.index > p.count || p.count > kMaxParts) return bad();
  return p;
}

using u128 = unsigned __int128;

std::pair<size_t, size_t> part_range(const std::vector<uint64_t>& bytes, PartSpec part) {
  const size_t n = bytes.size();
  const u128 parts = part.count;
  u128 total = 0;
  for (uint64_t b : bytes) total += b;
  const auto owner = [&](size_t t, u128 before) -> uint64_t {
    const u128 p = total ? (2 * before + bytes[t]) * parts / (2 * total) : u128(t) * parts / n;
    return uint64_t(std::min<u128>(p, parts - 1));
  };
  const uint64_t want = part.index - 1;
  size_t first = n, end = n;
  u128 before = 0;
  for (size_t t = 0; t < n; before += bytes[t], ++t) {
    const uint64_t o = owner(t, before);
    if (o == want && first == n) first = t;
    if (o > want) {
      end = t;
      break;
    }
  }
  if (first == n) first = end = std::min(end, n);  // an empty part: where it would start
  if (first > end) first = end;
  return {first, end};
}

uint64_t source_fingerprint(const Snapshot& snap) {
  constexpr uint64_t kSample = uint64_t(1) << 20;
  StreamingHash h;
  for (const auto& sh : snap.shards()) {
    const std::string name = std::filesystem::path(sh->path()).filename().string();
    const uint64_t size = sh->file_size();
    h.update(name.data(), name.size() + 1);
    h.update(&size, sizeof size);
    const uint64_t len = std::min(size, kSample);
    const uint64_t at[3] = {0, (size - len) / 2, size - len};
    for (uint64_t a : at) {
      const uint64_t sample = xxh3_64(sh->mapping().bytes(a, len).data(), len);
      h.update(&sample, sizeof sample);
    }
  }
  return h.digest();
}

PlanFingerprint::PlanFingerprint(const Snapshot& snap, const std::string& model_type, const nlohmann::json& provenance) {
  const uint64_t source = source_fingerprint(snap);
  hash_.update(&source, sizeof source);
  text(model_type);
  text(IRIS_VERSION);
  text(dump_json(provenance));
}

void PlanFingerprint::tensor(const TensorDesc& planned) { text(dump_json(tensor_desc_to_json(planned))); }

void PlanFingerprint::file(const std::string& name, const std::string& bytes) {
  text(name);
  const uint64_t h = xxh3_64(bytes.data(), bytes.size());
  hash_.update(&h, sizeof h);
}

nlohmann::json PartRecord::to_json() const {
  return {{"index", spec.index},       {"count", spec.count},   {"plan", hash_hex(plan)},
          {"first_tensor", first_tensor}, {"tensors", tensors}, {"total_tensors", total_tensors},
          {"manifest_reserve", manifest_reserve}};
}

Result<PartRecord> PartRecord::from_json(const nlohmann::json& j, const std::string& what) {
  const std::string ctx = what + ": part record: ";
  if (!j.is_object()) return invalid_input(what + ": not a conversion part (no part record: a whole archive?)");
  PartRecord r;
  const auto u64 = [&](const char* key, uint64_t* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return invalid_input(ctx + "'" + key + "' missing or not an unsigned integer");
    *out = it->get<uint64_t>();
    return Status::ok();
  };
  uint64_t index = 0, count = 0;
  IRIS_TRY(u64("index", &index));
  IRIS_TRY(u64("count", &count));
  if (index < 1 || count < 1 || index > count || count > kMaxParts)
    return invalid_input(ctx + "index " + std::to_string(index) + " of " + std::to_string(count) + " is out of range");
  r.spec = {uint32_t(index), uint32_t(count)};
  auto plan = j.find("plan");
  if (plan == j.end() || !plan->is_string() || !parse_hash_hex(plan->get<std::string>(), &r.plan))
    return invalid_input(ctx + "'plan' missing or not 16 hex digits");
  IRIS_TRY(u64("first_tensor", &r.first_tensor));
  IRIS_TRY(u64("tensors", &r.tensors));
  IRIS_TRY(u64("total_tensors", &r.total_tensors));
  IRIS_TRY(u64("manifest_reserve", &r.manifest_reserve));
  if (r.first_tensor > r.total_tensors || r.tensors > r.total_tensors - r.first_tensor)
    return invalid_input(ctx + "tensors [" + std::to_string(r.first_tensor) + ", +" + std::to_string(r.tensors) + ") lie outside the " +
                         std::to_string(r.total_tensors) + " of the conversion");
  return r;
}

}  // namespace iris
