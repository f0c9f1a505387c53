#include "converter/sources/quant_scheme.h"

#include <set>

#include "converter/sources/checkpoint_schemes.h"
#include "formats/json_limits.h"

namespace iris {

using nlohmann::json;

namespace {

constexpr const char* kNotDecoded = ": iris does not decode this scheme (it reads mxfp4, bitsandbytes 4-bit and LLM.int8, fp8 and fbgemm_fp8, "
                                    "gptq (v1, v2: 2, 3, 4, 8 bits), awq (GEMM), compressed-tensors float-quantized FP8, "
                                    "pack-quantized 2/4/8-bit integers, nvfp4-pack-quantized and mxfp4-pack-quantized, and ModelOpt FP8 and NVFP4)";

std::string string_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// compressed-tensors: the global `format`, each config group's own `format` and its weights'
// quantization args, and a sparsity config. FP8 weights stored as F8_E4M3 with float scales
// (float-quantized, or naive-quantized floats), integers of 2, 4 or 8 bits packed into int32
// words (pack-quantized) and dense ones are read.
Status check_compressed_tensors(const json& qc, const std::string& where) {
  auto refuse = [&](const std::string& what) { return unsupported(where + "compressed-tensors " + what + kNotDecoded); };
  const std::set<std::string> readable = {"float-quantized", "naive-quantized", "pack-quantized", "nvfp4-pack-quantized",
                                          "mxfp4-pack-quantized", "dense", ""};
  const std::string global = string_at(qc, "format");
  if (!readable.count(global)) return refuse("format '" + global + "'");
  if (auto sp = qc.find("sparsity_config"); sp != qc.end() && sp->is_object()) {
    const std::string f = string_at(*sp, "format");
    if (!f.empty() && f != "dense") return refuse("sparsity format '" + f + "'");
  }
  auto groups = qc.find("config_groups");
  if (groups == qc.end() || groups->is_null()) return Status::ok();
  if (!groups->is_object()) return invalid_input(where + "quantization_config.config_groups is not an object");
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) return invalid_input(where + "quantization_config.config_groups." + name + " is not an object");
    const std::string f = string_at(g, "format");
    if (!readable.count(f)) return refuse("format '" + f + "' (config group '" + name + "')");
    auto w = g.find("weights");
    if (w == g.end() || w->is_null()) continue;
    if (!w->is_object()) return invalid_input(where + "quantization_config.config_groups." + name + ".weights is not an object");
    const std::string type = string_at(*w, "type");
    auto bits = w->find("num_bits");
    const bool fp8 = type == "float" && bits != w->end() && bits->is_number_integer() && bits->get<int64_t>() == 8;
    const std::string packing = f.empty() ? global : f;
    const bool packed_int = type == "int" && packing == "pack-quantized" && bits != w->end() && bits->is_number_integer() &&
                            (bits->get<int64_t>() == 2 || bits->get<int64_t>() == 4 || bits->get<int64_t>() == 8);
    auto group_size = w->find("group_size");
    const bool nvfp4 = type == "float" && packing == "nvfp4-pack-quantized" && bits != w->end() && bits->is_number_integer() &&
                       bits->get<int64_t>() == 4 && group_size != w->end() && group_size->is_number_integer() && group_size->get<int64_t>() == 16;
    const bool mxfp4 = type == "float" && packing == "mxfp4-pack-quantized" && bits != w->end() && bits->is_number_integer() &&
                       bits->get<int64_t>() == 4 && group_size != w->end() && group_size->is_number_integer() && group_size->get<int64_t>() == 32;
    if (!fp8 && !packed_int && !nvfp4 && !mxfp4) {
      const std::string b = bits != w->end() ? bits->dump() : "?";
      return refuse(b + "-bit " + (type.empty() ? std::string("?") : type) + " weights (config group '" + name + "', format '" +
                    (f.empty() ? global : f) + "')");
    }
  }
  return Status::ok();
}

Status check_modelopt_algo(const std::string& algo, const std::string& where) {
  if (algo.empty() || algo == "FP8" || algo == "NVFP4") return Status::ok();
  return unsupported(where + "ModelOpt quant_algo '" + algo + "'" + kNotDecoded);
}

Status check_quantization_config(const json& qc, const std::string& where) {
  const std::string method = string_at(qc, "quant_method");
  if (method.empty()) return Status::ok();
  if (method == "bitsandbytes") return Status::ok();  // 4-bit, or LLM.int8 (load_in_8bit)
  if (method == "compressed-tensors") return check_compressed_tensors(qc, where);
  if (method == "modelopt") return check_modelopt_algo(string_at(qc, "quant_algo"), where);
  for (const auto* scheme : checkpoint_schemes())  // a method only a decoded scheme declares
    for (const char* m : scheme->quant_methods)
      if (scheme->decoded && method == m) return Status::ok();
  std::string detail = method;
  for (const char* key : {"bits", "version", "checkpoint_format"})
    if (auto it = qc.find(key); it != qc.end() && (it->is_number() || it->is_string()))
      detail += std::string(", ") + key + " " + (it->is_string() ? it->get<std::string>() : it->dump());
  return unsupported(where + "quant_method '" + method + "' (" + detail + ")" + kNotDecoded);
}

}  // namespace

Status check_quantization_scheme(const Snapshot& snap) {
  const json& qc = snap.config().quantization_config;
  if (qc.is_object()) IRIS_TRY(check_quantization_config(qc, snap.folder() + "/config.json: quantization_config declares "));
  for (const auto& f : snap.aux_files()) {
    if (f.name != "hf_quant_config.json") continue;
    const std::string where = snap.folder() + "/hf_quant_config.json: ";
    IRIS_ASSIGN_OR_RETURN(json j, parse_untrusted_json(f.bytes, where + "JSON", false));
    auto q = j.is_object() ? j.find("quantization") : j.end();
    if (!j.is_object() || q == j.end() || !q->is_object()) return invalid_input(where + "no 'quantization' object");
    IRIS_TRY(check_modelopt_algo(string_at(*q, "quant_algo"), where + "declares "));
  }
  return Status::ok();
}

}  // namespace iris
