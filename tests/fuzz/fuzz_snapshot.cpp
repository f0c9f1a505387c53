// libFuzzer target: a safetensors file as a snapshot, through header parsing, the snapshot
// and the grouping of companion tensors (MXFP4, bitsandbytes, FP8), under one of several
// quantization configs chosen by the first byte. The safetensors reader runs over memory; the
// snapshot reader works on folders, so an input the reader accepts is then written to a
// private temporary folder (tmpfs where there is one).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "converter/sources/safetensors_file.h"
#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "formats/format_traits.h"

namespace {

const char* kConfigs[] = {
    nullptr,
    R"({"model_type":"llama"})",
    R"({"model_type":"llama","quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}})",
    R"({"model_type":"llama","quantization_config":{"quant_method":"fp8","weight_block_size":[2,3]}})",
    R"({"model_type":"llama","quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true,"llm_int8_skip_modules":["lm_head","a.*.b"]}})",
    R"({"model_type":"gpt_oss","quantization_config":{"quant_method":"mxfp4","modules_to_not_convert":["model.layers.*.self_attn"]}})",
};

std::string folder() {
  static const std::string dir = [] {
    const char* base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string t = std::string(base) + "/iris-fuzz-snapshot-XXXXXX";
    return std::string(mkdtemp(t.data()));
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  if (size < 1) return 0;
  // The reader itself over memory; only inputs it accepts go on through the snapshot path,
  // which reads folders.
  auto file = SafetensorsFile::open_memory({data + 1, size - 1}, "fuzz.safetensors");
  if (!file.is_ok()) return 0;
  for (const auto& t : file->tensors()) (void)file->data(t);
  const std::string dir = folder();
  const char* config = kConfigs[data[0] % (sizeof kConfigs / sizeof kConfigs[0])];
  std::filesystem::remove(dir + "/config.json");
  if (config) std::ofstream(dir + "/config.json") << config;
  std::ofstream(dir + "/model.safetensors", std::ios::binary).write(reinterpret_cast<const char*>(data + 1), std::streamsize(size - 1));
  auto snap = Snapshot::open(dir);
  if (!snap.is_ok()) return 0;
  for (bool allow : {false, true}) {
    auto groups = group_source_tensors(*snap, GroupingOptions{allow});
    if (!groups.is_ok()) continue;
    for (const auto& t : *groups) {
      (void)t.source_json();
      if (is_quantized(t.desc.format)) (void)component_specs(t.desc);
    }
  }
  return 0;
}
