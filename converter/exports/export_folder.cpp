#include "converter/exports/export_folder.h"
#include "converter/pipeline/temp_folder.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/checked_math.h"
#include "converter/sources/archive_snapshot.h"
#include "converter/sources/safetensors_writer.h"
#include "converter/exports/folder_output.h"
#include "formats/format_traits.h"
#include "formats/iris_archive.h"

namespace iris {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A string member of an untrusted JSON object, or "" (absent, null, or not a string).
std::string string_member(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// An int_group tensor is written back in its checkpoint's packing (export_int_group.h), which
// the checkpoint's own quantization_config describes: its quant_method.
std::string int_group_method(const json& source) {
  const std::string m = string_member(source, "quant_method");
  if (m == "bitsandbytes") {  // LLM.int8's; a 4-bit config cannot describe int_group tensors
    auto it = source.find("load_in_8bit");
    if (it != source.end() && it->is_boolean() && it->get<bool>()) return "bitsandbytes-int8";
  }
  return m == "gptq" || m == "awq" || m == "compressed-tensors" ? m : "int_group without its checkpoint's quantization_config";
}

// An MXFP4 tensor carried from compressed-tensors' mxfp4-pack-quantized (its source record names
// the codes P.weight_packed) is written back under that checkpoint's quantization_config; one
// from gpt-oss or `--quant mxfp4`, under transformers' mxfp4 one.
std::string mxfp4_method(const ArchiveTensor& t) {
  const json source = t.source.json();
  auto parts = source.find("tensors");
  const bool ct = parts != source.end() && parts->is_array() && !parts->empty() && (*parts)[0].is_object() &&
                  (*parts)[0].value("name", std::string()).ends_with(".weight_packed");
  return ct ? "compressed-tensors" : "mxfp4";
}

// An FP8 tensor carried as stored (not requantized) from a compressed-tensors or ModelOpt
// checkpoint is written back under that checkpoint's own quantization_config (its scales per
// tensor or channel, which transformers' FP8 loader does not take, are that tool's); one from
// transformers' FineGrained FP8 or `--quant fp8*`, under transformers' fp8 config.
std::string fp8_method(const ArchiveTensor& t, const json& source_qc) {
  const json source = t.source.json();
  const bool carried = source.is_object() && source.contains("tensors") && !source.contains("requantized_from");
  const std::string m = string_member(source_qc, "quant_method");
  return carried && (m == "compressed-tensors" || m == "modelopt") ? m : "fp8";
}

// The quantization_config that describes the archive's tensors as export writes them (`keep`:
// each quantized tensor as its format's Hugging Face companions), or null when none is
// quantized. `source` is the embedded config's own, kept when it already says the same method.
Result<json> quantization_config_for(const IrisArchive& a, const json& source, const std::string& torch_dtype) {
  std::set<std::string> methods;
  const TensorDesc* first = nullptr;
  const std::vector<std::string> unquantized_linears = unquantized_linear_modules(a);
  for (const auto& t : a.manifest().tensors) {
    if (is_quantized(t.desc.format)) {
      methods.insert(t.desc.format == Format::kMxfp4     ? mxfp4_method(t)
                     : t.desc.format == Format::kFp8E4M3 ? fp8_method(t, source)
                     : t.desc.format == Format::kNvfp4   ? (t.desc.params.value("tensor_scale", "") == "divides" ? "compressed-tensors" : "modelopt")
                     : t.desc.format == Format::kIntGroup ? int_group_method(source)
                                                         : "bitsandbytes");
      if (!first) first = &t.desc;
    }
  }
  if (methods.empty()) return json(nullptr);
  const std::string ctx = a.path() + ": ";
  if (methods.size() > 1)
    return unsupported(ctx + "its quantized tensors mix formats that transformers loads with different quantization methods; export "
                             "--dtype bf16, or convert with one --quant format");
  const std::string method = *methods.begin();
  if (string_member(source, "quant_method") == method) return source;  // as the checkpoint said it
  if (method == "bitsandbytes-int8") return source;                      // (int_group_method read its load_in_8bit)
  if (method.rfind("int_group", 0) == 0)
    return unsupported(ctx + "its int_group tensors came without their checkpoint's quantization_config (GPTQ, AWQ, "
                             "compressed-tensors or LLM.int8) to write back; export --dtype bf16");
  if (method == "mxfp4") return json{{"quant_method", "mxfp4"}, {"modules_to_not_convert", unquantized_linears}};
  // NVFP4 written by convert --quant nvfp4: ModelOpt's unified checkpoint config (FORMATS.md 7.4).
  if (method == "modelopt")
    return json{{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}, {"kv_cache_quant_algo", nullptr},
                {"exclude_modules", unquantized_linears}, {"producer", {{"name", "iris"}, {"version", IRIS_VERSION}}}};
  if (method == "compressed-tensors")
    return unsupported(ctx + "its compressed-tensors NVFP4 or MXFP4 tensors came without the checkpoint's quantization_config; export --dtype bf16");
  if (method == "bitsandbytes") {
    const bool dq = first->params.value("double_quant", false);
    return json{{"quant_method", "bitsandbytes"},
                {"load_in_4bit", true},
                {"load_in_8bit", false},
                {"bnb_4bit_quant_type", first->format == Format::kNf4 ? "nf4" : "fp4"},
                {"bnb_4bit_use_double_quant", dq},
                {"bnb_4bit_compute_dtype", torch_dtype.empty() ? "bfloat16" : torch_dtype},
                {"bnb_4bit_quant_storage", "uint8"},
                {"llm_int8_skip_modules", unquantized_linears}};
  }
  // FineGrained FP8: block scales only.
  uint64_t bn = 0, bk = 0;
  for (const auto& t : a.manifest().tensors) {
    if (t.desc.format != Format::kFp8E4M3) continue;
    if (t.desc.params.value("scale_granularity", "") != "block")
      return unsupported(ctx + "tensor '" + t.desc.name + "' is FP8 scaled per " + t.desc.params.value("scale_granularity", "?") +
                         "; transformers' FP8 loader takes block scales only (convert with --quant fp8-block, or export --dtype bf16)");
    const uint64_t n = t.desc.params.value("block_n", uint64_t(0)), k = t.desc.params.value("block_k", uint64_t(0));
    if ((bn && (n != bn || k != bk)))
      return unsupported(ctx + "tensor '" + t.desc.name + "' has FP8 blocks of " + std::to_string(n) + "x" + std::to_string(k) +
                         ", others " + std::to_string(bn) + "x" + std::to_string(bk) + ": transformers takes one weight_block_size");
    bn = n, bk = k;
  }
  return json{{"quant_method", "fp8"},
              {"activation_scheme", "dynamic"},
              {"weight_block_size", {bn, bk}},
              {"modules_to_not_convert", unquantized_linears}};
}

// Embedded file names come from the archive, which is untrusted, and become paths inside the
// folder: each must be a plain file name ("../x", "/x" and "a/b" would write elsewhere) and not
// one of the files the export writes itself (a "model.safetensors" would replace tensors).
Status check_embedded_name(const std::string& archive, const std::string& name) {
  const bool plain = !name.empty() && name != "." && name != ".." && name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
  const bool ours = name.ends_with(".safetensors") || name == "model.safetensors.index.json";
  if (plain && !ours) return Status::ok();
  return invalid_input(archive + ": embedded file '" + name + "': " +
                       (plain ? "the export writes a file of that name itself" : "not a plain file name") +
                       "; refusing to write it into a folder (iris extract can still write it where you choose)");
}

// "model.safetensors" alone, else "model-0000i-of-0000N.safetensors", as save_pretrained names them.
std::string shard_name(size_t s, size_t count) {
  char name[64];
  if (count == 1) std::snprintf(name, sizeof name, "model.safetensors");
  else std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, count);
  return name;
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f.write(text.data(), std::streamsize(text.size()));
  f.close();
  return f ? Status::ok() : io_error(p.string() + ": write failed");
}

}  // namespace

Result<ExportReport> run_export_folder(const ExportOptions& o) {
  IRIS_ASSIGN_OR_RETURN(const std::optional<DType> target, export_dtype(o.dtype));
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(o.archive));
  IRIS_ASSIGN_OR_RETURN(const FolderDestination dest, folder_destination(o.output, o.overwrite, {o.archive}));
  for (const auto& f : a.manifest().files)
    if (f.name != "config.json") IRIS_TRY(check_embedded_name(o.archive, f.name));

  // config.json: the embedded one, its quantization_config replaced by what the tensors are.
  json config;
  bool has_config = false;
  for (const auto& f : a.manifest().files)
    if (f.name == "config.json") {
      IRIS_ASSIGN_OR_RETURN(std::string text, a.read_file(f.name));
      config = json::parse(text, nullptr, false);
      has_config = !config.is_discarded() && config.is_object();
    }
  if (!has_config)
    return unsupported(o.archive + ": it holds no config.json, which a Hugging Face folder needs (export a single .safetensors file instead)");
  std::string torch_dtype = string_member(config, "torch_dtype");
  if (torch_dtype.empty()) torch_dtype = string_member(config, "dtype");
  json qc = nullptr;
  if (!target) {
    const auto source_qc = config.find("quantization_config");
    IRIS_ASSIGN_OR_RETURN(qc, quantization_config_for(a, source_qc == config.end() ? json(nullptr) : *source_qc, torch_dtype));
  }
  if (qc.is_null()) config.erase("quantization_config");
  else config["quantization_config"] = qc;

  IRIS_ASSIGN_OR_RETURN(std::vector<SafetensorsEntry> entries, export_entries(a, target));
  // Shards in order, a new one when the next tensor would pass the limit (a tensor larger than
  // the limit gets a shard of its own), as save_pretrained does.
  std::vector<std::vector<SafetensorsEntry>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (auto& e : entries) {
    uint64_t bytes = dtype_bytes(e.dtype, checked_numel(e.shape).value_or(0)).value_or(0);
    if (in_shard > 0 && in_shard + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += bytes;
    total += bytes;
    shards.back().push_back(std::move(e));
  }
  std::set<std::string> written_names = {"config.json"};
  for (size_t s = 0; s < shards.size(); ++s) written_names.insert(shard_name(s, shards.size()));
  if (shards.size() > 1) written_names.insert("model.safetensors.index.json");
  for (const auto& f : a.manifest().files) written_names.insert(f.name);
  IRIS_TRY(refuse_stale_weights(dest, written_names));
  // A new DIR is made beside its final name; into an existing one, the files are made inside
  // it, so that their renames never cross filesystems (DIR may be a mount point).
  IRIS_ASSIGN_OR_RETURN(TempFolder tmp, TempFolder::beside(dest.exists ? dest.dir / ".iris-export" : dest.dir));
  const auto metadata = recorded_safetensors_metadata(a);
  json weight_map = json::object();
  uint64_t done = 0;
  ExportReport r;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shard_name(s, shards.size());
    for (const auto& e : shards[s]) weight_map[e.name] = name;
    r.tensors += shards[s].size();
    SafetensorsWriteOptions wo;
    wo.metadata = metadata;
    const uint64_t before = done;
    wo.progress = [&](uint64_t d, uint64_t) {
      done = before + d;
      if (o.progress) o.progress(done, total);
    };
    IRIS_TRY(write_safetensors((tmp.path() / name).string(), std::move(shards[s]), wo));
  }
  if (shards.size() > 1)
    IRIS_TRY(write_text(tmp.path() / "model.safetensors.index.json",
                        json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n"));
  IRIS_TRY(write_text(tmp.path() / "config.json", config.dump(2) + "\n"));
  for (const auto& f : a.manifest().files) {
    if (f.name == "config.json") continue;
    IRIS_ASSIGN_OR_RETURN(std::string text, a.read_file(f.name));
    IRIS_TRY(write_text(tmp.path() / f.name, text));
  }
  IRIS_TRY(publish_folder(tmp.path(), dest));
  if (!dest.exists) tmp.release();  // renamed into place; else emptied, and removed by its destructor
  r.bytes = total;
  return r;
}

}  // namespace iris
