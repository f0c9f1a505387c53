// A Hugging Face checkpoint snapshot: its safetensors shards, resolved through the index,
// and the small JSON/tokenizer files that travel with it.
//
// SRC may be a snapshot folder, a single .safetensors file, or a repo id (`org/name` or
// `org/name@revision`) looked up in the local Hugging Face cache (FORMATS.md 1.5, 1.6).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "converter/sources/safetensors_file.h"
#include "formats/format_traits.h"
#include "formats/tensor_desc.h"

namespace iris {

struct ModelConfig {
  std::string model_type;                  // "" when config.json is absent or has none
  std::string torch_dtype;                 // config "dtype"/"torch_dtype", e.g. "bfloat16"
  nlohmann::json quantization_config;      // null when absent
  std::vector<std::string> skip_modules;   // modules_to_not_convert, llm_int8_skip_modules, ignore, ...
};

// One tensor of the snapshot and the shard that holds it.
struct SnapshotTensor {
  const SafetensorsFile* file;
  const SafetensorsTensor* tensor;
};

class IrisArchive;

// A tensor of an .iris archive read as a source (Snapshot::open_archive): its components in
// place, in component_specs order. Its descriptor (layout included), record and checksums are
// the manifest's tensor `index`.
struct StoredSourceTensor {
  std::vector<std::pair<Role, SnapshotTensor>> components;
  size_t index = 0;
};

struct AuxFile {
  std::string name;   // relative to the snapshot folder, e.g. "tokenizer.json"
  std::string bytes;
};

class Snapshot {
 public:
  static Result<Snapshot> open(const std::string& src);
  // A seed-engine .iris v1 archive as the snapshot it was converted from (sources/v1_snapshot.cpp):
  // its tensors under their Hugging Face gpt-oss names, read in place; the config from
  // `config_source` (a config.json, or a snapshot folder whose config and tokenizer files
  // come along), which v1 does not hold.
  static Result<Snapshot> open_v1(const std::string& v1_path, const std::string& config_source);
  // An .iris archive (or archive set) as a source, read in place (sources/archive_snapshot.cpp): its
  // tensors as they are stored, quantized codes tiled, each checked against its checksums when
  // first read; its embedded files; the source skip list export's quantization_config would
  // write (the archive's unquantized linears, where it holds quantized tensors).
  static Result<Snapshot> open_archive(const std::string& path);

  const std::string& folder() const { return folder_; }
  const std::string& resolved_from() const { return resolved_from_; }  // how SRC was interpreted
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // Every tensor reachable through the index, in shard order then file order (sequential reads).
  const std::vector<SnapshotTensor>& tensors() const { return tensors_; }
  const SnapshotTensor* find(const std::string& name) const;
  const ModelConfig& config() const { return config_; }
  const std::optional<nlohmann::json>& config_json() const { return config_json_; }
  const std::vector<AuxFile>& aux_files() const { return aux_files_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  uint64_t total_tensor_bytes() const;
  // An archive source's tensors (open_archive); empty for every other source, whose tensors
  // group_source_tensors groups from tensors().
  const std::vector<StoredSourceTensor>& stored_tensors() const { return stored_; }
  const std::shared_ptr<const IrisArchive>& archive() const { return archive_; }
  // The shards' safetensors __metadata__, merged (the first shard's value wins a conflict):
  // what convert records for export to write back, and what inspect shows.
  std::map<std::string, std::string> safetensors_metadata() const;

 private:
  Status load_folder(const std::string& folder, const std::string& single_file);
  Status load_index(const std::string& index_path);
  Status load_config();
  Status load_config_file(const std::string& path);  // a config.json of any name, embedded as config.json
  Status load_aux_files();

  std::string folder_;
  std::string resolved_from_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<SnapshotTensor> tensors_;
  // Positions in tensors_, by the names the shards hold (heap-allocated, so they stay put when
  // the snapshot moves): 10^6 names are not copied.
  struct Names {
    const SnapshotTensor* tensors = nullptr;  // tensors_'s buffer, which a move keeps in place
    std::string_view operator()(size_t i) const { return tensors[i].tensor->name; }
  };
  NameIndex<Names> by_name_;
  void index_names();  // by_name_ over the complete tensors_
  ModelConfig config_;
  std::optional<nlohmann::json> config_json_;
  std::vector<AuxFile> aux_files_;
  std::vector<std::string> warnings_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;  // bytes of in-memory shards (v1 sources)
  std::vector<StoredSourceTensor> stored_;
  std::shared_ptr<const IrisArchive> archive_;
  std::map<std::string, std::string> archive_metadata_;  // an archive source's recorded __metadata__
};

// Resolves `org/name[@revision]` in the Hugging Face cache to a snapshot folder.
Result<std::string> resolve_hf_repo_id(const std::string& repo_id);
bool looks_like_repo_id(const std::string& s);
std::string hf_cache_dir();

// Parses config.json text (already read) into a ModelConfig; `path` names it in errors.
Result<ModelConfig> parse_model_config(const nlohmann::json& j, const std::string& path);

}  // namespace iris
