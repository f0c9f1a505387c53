#include "converter/sources/snapshot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "formats/json_limits.h"

namespace iris {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxSmallFile = 256ull << 20;  // config, index, tokenizer files

// Files embedded in the archive when present (tokenizers are what engines need beside weights).
const char* const kAuxNames[] = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
    "chat_template.json", "preprocessor_config.json", "hf_quant_config.json",
};

Result<std::string> read_small_file(const fs::path& p) {
  std::error_code ec;
  // A device, FIFO or folder has no size to check (file_size said "Operation not supported"),
  // and /dev/zero would be read forever: metadata comes from regular files only.
  const auto st = fs::status(p, ec);
  if (!ec && st.type() != fs::file_type::regular)
    return invalid_input(p.string() + ": not a regular file (" +
                         (st.type() == fs::file_type::directory   ? "a folder"
                          : st.type() == fs::file_type::character ? "a character device"
                          : st.type() == fs::file_type::block     ? "a block device"
                          : st.type() == fs::file_type::fifo      ? "a FIFO"
                                                                  : "a special file") +
                         ")");
  auto size = fs::file_size(p, ec);
  if (ec) return io_error(p.string() + ": cannot stat: " + ec.message());
  if (size > kMaxSmallFile) return invalid_input(p.string() + ": larger than 256 MiB, refusing to read it as metadata");
  std::ifstream in(p, std::ios::binary);
  if (!in) return io_error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return io_error(p.string() + ": read failed");
  return ss.str();
}

// Lexically inside the folder: relative, no "..", no root. (Targets of symlinks are not
// checked: the HF cache links every snapshot file to ../../blobs.)
bool stays_inside(const std::string& rel) {
  fs::path p(rel);
  if (rel.empty() || p.is_absolute() || p.has_root_name() || p.has_root_directory()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

void append_strings(const json& j, std::vector<std::string>* out) {
  if (j.is_array())
    for (const auto& v : j)
      if (v.is_string()) out->push_back(v.get<std::string>());
}

}  // namespace

Result<ModelConfig> parse_model_config(const json& j, const std::string& path) {
  if (!j.is_object()) return invalid_input(path + ": not a JSON object");
  ModelConfig c;
  if (auto it = j.find("model_type"); it != j.end()) {
    if (!it->is_string()) return invalid_input(path + ": 'model_type' is not a string");
    c.model_type = it->get<std::string>();
  }
  for (const char* key : {"torch_dtype", "dtype"})
    if (auto it = j.find(key); it != j.end() && it->is_string()) c.torch_dtype = it->get<std::string>();
  if (auto it = j.find("quantization_config"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_input(path + ": 'quantization_config' is not an object");
    c.quantization_config = *it;
    for (const char* key : {"modules_to_not_convert", "llm_int8_skip_modules", "ignore", "ignored_layers",
                            "exclude_modules"}) {
      if (auto s = it->find(key); s != it->end() && !s->is_null()) {
        if (!s->is_array()) return invalid_input(path + ": quantization_config." + key + " is not a list");
        for (const auto& v : *s)
          if (!v.is_string()) return invalid_input(path + ": quantization_config." + key + " holds a non-string");
        append_strings(*s, &c.skip_modules);
      }
    }
  }
  return c;
}

Result<Snapshot> Snapshot::open(const std::string& src) {
  Snapshot s;
  std::error_code ec;
  const fs::path p(src);
  if (fs::is_directory(p, ec)) {
    s.resolved_from_ = "folder " + src;
    IRIS_TRY(s.load_folder(src, ""));
  } else if (fs::exists(p, ec)) {
    s.resolved_from_ = "file " + src;
    std::string parent = p.parent_path().string();
    IRIS_TRY(s.load_folder(parent.empty() ? "." : parent, p.filename().string()));
  } else if (looks_like_repo_id(src)) {
    IRIS_ASSIGN_OR_RETURN(std::string folder, resolve_hf_repo_id(src));
    s.resolved_from_ = "repo " + src + " -> " + folder;
    IRIS_TRY(s.load_folder(folder, ""));
  } else {
    return io_error(src + ": no such file or folder");  // as MappedFile says it: one exit code (5) everywhere
  }
  return s;
}

Status Snapshot::load_folder(const std::string& folder, const std::string& single_file) {
  folder_ = folder;
  if (!single_file.empty()) {
    if (single_file.size() > 11 && single_file.ends_with(".index.json")) {
      IRIS_TRY(load_index((fs::path(folder) / single_file).string()));
    } else {
      IRIS_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open((fs::path(folder) / single_file).string()));
      shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
      for (const auto& t : shards_.back()->tensors()) tensors_.push_back({shards_.back().get(), &t});
    }
  } else {
    std::vector<std::string> indexes, files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      std::string n = e.path().filename().string();
      if (n.ends_with(".safetensors.index.json")) indexes.push_back(n);
      else if (n.ends_with(".safetensors")) files.push_back(n);
    }
    if (ec) return io_error(folder + ": cannot list: " + ec.message());
    std::sort(indexes.begin(), indexes.end());
    std::sort(files.begin(), files.end());
    if (std::find(indexes.begin(), indexes.end(), "model.safetensors.index.json") != indexes.end()) {
      IRIS_TRY(load_index((fs::path(folder) / "model.safetensors.index.json").string()));
    } else if (indexes.size() == 1) {
      IRIS_TRY(load_index((fs::path(folder) / indexes[0]).string()));
    } else if (indexes.size() > 1) {
      return invalid_input(folder + ": several *.safetensors.index.json and none is model.safetensors.index.json; name one");
    } else if (std::find(files.begin(), files.end(), "model.safetensors") != files.end() || files.size() == 1) {
      std::string name = files.size() == 1 ? files[0] : "model.safetensors";
      IRIS_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open((fs::path(folder) / name).string()));
      shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
      for (const auto& t : shards_.back()->tensors()) tensors_.push_back({shards_.back().get(), &t});
    } else if (files.empty()) {
      // Say what the folder holds instead, when it is another format's checkpoint.
      for (const auto& e : fs::directory_iterator(folder, ec)) {
        const std::string n = e.path().filename().string();
        if (n.ends_with(".bin") || n.ends_with(".pt") || n.ends_with(".pth") || n.ends_with(".gguf"))
          return unsupported(folder + ": no .safetensors file, but '" + n +
                             "' (a PyTorch pickle or GGUF checkpoint, which iris does not read): save the model with safetensors "
                             "(save_pretrained(..., safe_serialization=True)) and convert that");
      }
      return invalid_input(folder + ": no .safetensors file and no model.safetensors.index.json");
    } else {
      return invalid_input(folder + ": " + std::to_string(files.size()) +
                           " .safetensors files but no index to say which tensors they hold");
    }
  }
  index_names();
  IRIS_TRY(load_config());
  IRIS_TRY(load_aux_files());
  return Status::ok();
}

Status Snapshot::load_index(const std::string& index_path) {
  IRIS_ASSIGN_OR_RETURN(std::string text, read_small_file(index_path));
  IRIS_ASSIGN_OR_RETURN(json j, parse_untrusted_json(text, index_path));
  if (!j.is_object()) return invalid_input(index_path + ": not a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return invalid_input(index_path + ": no 'weight_map' object");
  // Shards in order of first appearance in the sorted weight_map -> deterministic.
  std::vector<std::string> shard_names;
  std::unordered_map<std::string, size_t> shard_of;
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return invalid_input(index_path + ": weight_map entry '" + it.key() + "' is not a string");
    std::string shard = it->get<std::string>();
    if (!stays_inside(shard))
      return invalid_input(index_path + ": weight_map points tensor '" + it.key() + "' to '" + shard +
                           "', outside the snapshot folder");
    if (shard_of.emplace(shard, shard_names.size()).second) shard_names.push_back(shard);
    entries.emplace_back(it.key(), shard);
  }
  std::sort(shard_names.begin(), shard_names.end());
  for (size_t i = 0; i < shard_names.size(); ++i) {
    shard_of[shard_names[i]] = i;
    fs::path sp = fs::path(folder_) / shard_names[i];
    std::error_code ec;
    if (!fs::exists(sp, ec))
      return invalid_input(index_path + ": shard '" + shard_names[i] + "' listed in weight_map is missing");
    IRIS_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(sp.string()));
    shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
  }
  // A name held by two shards is ambiguous whatever weight_map says.
  std::unordered_map<std::string, std::string> holder;
  for (const auto& sh : shards_)
    for (const auto& t : sh->tensors()) {
      auto [it, fresh] = holder.emplace(t.name, sh->path());
      if (!fresh)
        return invalid_input(sh->path() + ": tensor '" + t.name + "' is also in " + it->second +
                             " (duplicate name across shards)");
    }
  std::unordered_map<std::string, bool> listed;
  for (const auto& [name, shard] : entries) {
    const SafetensorsFile* f = shards_[shard_of[shard]].get();
    if (!f->find(name))
      return invalid_input(index_path + ": weight_map says tensor '" + name + "' is in '" + shard + "', which lacks it");
    listed[name] = true;
  }
  for (const auto& sh : shards_)
    for (const auto& t : sh->tensors()) {
      if (listed.count(t.name)) tensors_.push_back({sh.get(), &t});
      else warnings_.push_back(sh->path() + ": tensor '" + t.name + "' is not in weight_map; ignored");
    }
  return Status::ok();
}

namespace {

// Whether the snapshot names `p` (a directory entry of any kind, a dangling symlink included),
// and if so, that it is a readable regular file: a snapshot file that cannot be read is an
// error, never a silent skip (the archive would lose its config with exit 0).
Result<bool> named_file(const fs::path& p) {
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(p, ec);
  if (ec || link.type() == fs::file_type::not_found) return false;
  const fs::file_status target = fs::status(p, ec);
  if (ec) return invalid_input(p.string() + ": cannot be read (" + (fs::is_symlink(link) ? "a broken or looping symlink: " : "") + ec.message() + ")");
  if (!fs::is_regular_file(target)) return invalid_input(p.string() + ": not a regular file");
  return true;
}

}  // namespace

Status Snapshot::load_config() {
  fs::path cp = fs::path(folder_) / "config.json";
  IRIS_ASSIGN_OR_RETURN(bool present, named_file(cp));
  if (!present) return Status::ok();
  IRIS_ASSIGN_OR_RETURN(std::string text, read_small_file(cp));
  IRIS_ASSIGN_OR_RETURN(json j, parse_untrusted_json(text, cp.string()));
  IRIS_ASSIGN_OR_RETURN(config_, parse_model_config(j, cp.string()));
  config_json_ = std::move(j);
  aux_files_.push_back({"config.json", std::move(text)});  // embedded byte for byte
  return Status::ok();
}

Status Snapshot::load_config_file(const std::string& path) {
  IRIS_ASSIGN_OR_RETURN(std::string text, read_small_file(path));
  IRIS_ASSIGN_OR_RETURN(json j, parse_untrusted_json(text, path));
  IRIS_ASSIGN_OR_RETURN(config_, parse_model_config(j, path));
  config_json_ = std::move(j);
  aux_files_.push_back({"config.json", std::move(text)});
  return Status::ok();
}

Status Snapshot::load_aux_files() {
  for (const char* name : kAuxNames) {
    fs::path p = fs::path(folder_) / name;
    IRIS_ASSIGN_OR_RETURN(bool present, named_file(p));
    if (!present) continue;
    IRIS_ASSIGN_OR_RETURN(std::string bytes, read_small_file(p));
    if (std::string_view(name).ends_with(".json")) {
      // Embedded JSON must parse, so that a reader can trust what the archive carries.
      IRIS_ASSIGN_OR_RETURN(json unused, parse_untrusted_json(bytes, p.string(), false));
      (void)unused;
    }
    aux_files_.push_back({name, std::move(bytes)});
  }
  return Status::ok();
}

void Snapshot::index_names() {
  by_name_ = NameIndex<Names>(Names{tensors_.data()});
  by_name_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.insert(i);
}

const SnapshotTensor* Snapshot::find(const std::string& name) const {
  const size_t i = by_name_.find(name);
  return i == by_name_.npos ? nullptr : &tensors_[i];
}

std::map<std::string, std::string> Snapshot::safetensors_metadata() const {
  std::map<std::string, std::string> m = archive_metadata_;
  for (const auto& sh : shards_) m.insert(sh->metadata().begin(), sh->metadata().end());  // insert keeps the first
  return m;
}

uint64_t Snapshot::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.tensor->size;
  return n;
}

}  // namespace iris
