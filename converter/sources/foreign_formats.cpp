#include "converter/sources/foreign_formats.h"

#include <cstring>

namespace iris {

std::optional<std::string> foreign_format_hint(std::span<const uint8_t> h) {
  auto starts = [&](const char* magic, size_t n) { return h.size() >= n && std::memcmp(h.data(), magic, n) == 0; };
  if (starts("GGUF", 4))
    return std::string("a GGUF file (llama.cpp), not safetensors: iris reads Hugging Face checkpoints; convert from the original "
                       "safetensors snapshot the GGUF was made from");
  if (starts("IRISMDL1", 8))
    return std::string("a .iris v1 archive (the seed engine's): convert it with --config giving the model's config.json");
  if (starts("IRISMDL", 7))
    return std::string("an .iris archive, not safetensors: iris export it to safetensors (iris export ARCHIVE -o OUT.safetensors) and "
                       "convert that");
  if (starts("PK\x03\x04", 4))
    return std::string("a zip archive (a PyTorch .pt/.bin checkpoint saved by torch.save, or a zipped folder): iris does not unpickle "
                       "(loading a pickle runs its code); save it with safetensors (save_pretrained(..., safe_serialization=True)), "
                       "or unzip a zipped snapshot");
  if (h.size() >= 2 && h[0] == 0x80 && h[1] >= 2 && h[1] <= 5)
    return std::string("a Python pickle (a legacy PyTorch .bin/.pt checkpoint): iris does not unpickle (loading a pickle runs its "
                       "code); save it with safetensors (save_pretrained(..., safe_serialization=True))");
  return std::nullopt;
}

}  // namespace iris
