// libFuzzer target: `iris shard`'s split rules and lossless slicing (converter/shard) over a
// buffer holding an archive, as it is and sealed (seal_archive.h), under a model shape drawn
// from the input's last bytes and passed through the same config check `iris shard` uses.
// Whatever the bytes, every rank's share of every tensor is a Status or a box whose slice
// produces its components without a crash, a hang or a sanitizer report, and the bytes it
// produces are exactly what the box's descriptor says.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "converter/shard/shard_rules.h"
#include "converter/shard/tensor_slice.h"
#include "formats/iris_archive.h"
#include "tests/fuzz/seal_archive.h"

namespace {

class CountingSink : public iris::ByteSink {
 public:
  iris::Status write(std::span<const uint8_t> b) override {
    n += b.size();
    return iris::Status::ok();
  }
  uint64_t n = 0;
};

void run_shard(const uint8_t* data, size_t size, const uint8_t* tail) {
  using namespace iris;
  auto a = IrisArchive::open_memory({data, size}, "fuzz.iris");
  if (!a.is_ok()) return;
  static const char* const kTypes[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"};
  const uint32_t tps[] = {1, 2, 3, 4, 8};
  const ShardSpec spec{tps[tail[0] % 5], 1u + (tail[1] % 2)};
  // Heads, key/value heads and head size from the input (0 and huge values included), as a
  // config.json would give them.
  const uint64_t heads = tail[2] % 5 == 0 ? 0 : tail[2] % 3 == 0 ? (uint64_t(1) << 40) : tail[2] % 17;
  const uint64_t head_dim = tail[3] % 7 == 0 ? (uint64_t(1) << 62) : tail[3] % 129;
  const std::string config = "{\"num_attention_heads\": " + std::to_string(heads) + ", \"num_key_value_heads\": " + std::to_string(tail[4] % 9) +
                             ", \"head_dim\": " + std::to_string(head_dim) + ", \"num_local_experts\": " + std::to_string(tail[5] % 9) + "}";
  auto shape = model_shape_for_sharding(config, kTypes[tail[6] % 8], spec, "fuzz.iris");
  if (!shape.is_ok()) return;
  for (const auto& t : a->manifest().tensors) {
    uint64_t bytes = 0;
    for (const auto& c : t.components) bytes += c.spec.bytes;
    if (bytes > (1u << 20)) continue;  // bounded work per input
    for (uint32_t r = 0; r < spec.tp; ++r) {
      auto share = rank_share(t.desc.name, t.desc.shape, *shape, spec, r);
      if (!share.is_ok() || !share->present) continue;
      auto sliced = slice_tensor(*a, t, share->box);
      if (!sliced.is_ok()) continue;
      auto specs = component_specs(sliced->desc);
      if (!specs.is_ok() || specs->size() != sliced->producers.size()) __builtin_trap();  // a slice's descriptor must hold
      for (size_t c = 0; c < specs->size(); ++c) {
        CountingSink sink;
        if (!sliced->producers[c](sink).is_ok()) continue;
        if (sink.n != (*specs)[c].bytes) __builtin_trap();  // the bytes the descriptor promises, no more, no less
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t tail[7] = {0, 0, 12, 64, 4, 4, 0};  // a 4-head, 4 key/value-head llama of 64 when the input is shorter
  if (size >= 7) std::memcpy(tail, data + size - 7, 7);
  run_shard(data, size, tail);
  const std::vector<uint8_t> sealed = iris::fuzz::seal_archive(data, size);
  if (sealed.size() != size || (size > 0 && std::memcmp(sealed.data(), data, size) != 0)) run_shard(sealed.data(), sealed.size(), tail);
  return 0;
}
