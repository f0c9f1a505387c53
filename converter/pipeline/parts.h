// Conversion as independent parts, merged byte for byte (FORMAT.md section 9).
//
// `iris convert --part i/n` plans the whole conversion, as one process would, and writes the
// tensors of part i only: a contiguous run of the conversion's tensor order, the n runs
// balanced by output bytes. The part is an archive of those tensors with a part record: its
// place in the order, the manifest room the whole archive reserves, and a fingerprint of the
// plan (source, options, every tensor's planned descriptor, embedded files, iris version), so
// that `iris merge` can refuse parts of another conversion and write exactly the archive a
// single process writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hashing.h"
#include "common/status.h"
#include "formats/tensor_desc.h"

namespace iris {

class Snapshot;

struct PartSpec {
  uint32_t index = 0;  // 1-based
  uint32_t count = 0;  // 0: not a part run
  bool active() const { return count > 0; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

constexpr uint32_t kMaxParts = 65536;

// "i/n" with 1 <= i <= n <= kMaxParts.
Result<PartSpec> parse_part_spec(std::string_view text);

// The tensors [first, end) of `part`, from each tensor's output bytes in conversion order:
// tensor t belongs to the part that holds the midpoint of its bytes, so the parts are
// contiguous, cover every tensor once, and differ in size by at most about one tensor. With no
// bytes at all, by count.
std::pair<size_t, size_t> part_range(const std::vector<uint64_t>& bytes, PartSpec part);

// A fingerprint of the source checkpoint that every part computes alike without reading it
// all: each shard's name, size, and XXH3 of its first, middle and last MiB (the safetensors
// header and tensor bytes from three places). It tells a different checkpoint (other weights of the
// same shapes included) from the same; it is not a checksum of every byte.
uint64_t source_fingerprint(const Snapshot& snap);

// The plan fingerprint (FORMAT.md section 9): what decides the archive's bytes, fed in the
// conversion's order -- the source, model type, iris version and provenance (options
// included) at construction, then every planned tensor descriptor and embedded file.
class PlanFingerprint {
 public:
  PlanFingerprint(const Snapshot& snap, const std::string& model_type, const nlohmann::json& provenance);
  void tensor(const TensorDesc& planned);
  void file(const std::string& name, const std::string& bytes);
  uint64_t digest() const { return hash_.digest(); }

 private:
  void text(const std::string& s) { hash_.update(s.data(), s.size() + 1); }
  StreamingHash hash_;
};

// The part record (FORMAT.md section 9) and its reading: the schema every field must meet.
struct PartRecord {
  PartSpec spec;
  uint64_t plan = 0;              // the plan fingerprint
  uint64_t first_tensor = 0;      // this part's first tensor in the whole conversion's order
  uint64_t tensors = 0;           // how many it holds
  uint64_t total_tensors = 0;     // in the whole conversion
  uint64_t manifest_reserve = 0;  // the manifest room of the whole archive (IrisWriter::manifest_reservation)
  nlohmann::json to_json() const;
  // `what` names the file in messages.
  static Result<PartRecord> from_json(const nlohmann::json& j, const std::string& what);
};

}  // namespace iris
