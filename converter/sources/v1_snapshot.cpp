// A seed-engine .iris v1 archive as a conversion source: the snapshot it came from, rebuilt
// without copying its weights. Each v1 entry gets back its Hugging Face gpt-oss name
// (sources/seed_names.h) and dtype, and is read in place from the v1 file; the MXFP4 experts' raw
// blocks and scales then group into one mxfp4 tensor exactly as the snapshot's would. The
// seed widened BF16 norms and sinks to FP32: where every value of such a tensor is a BF16
// value, it is narrowed back (lossless), so converting the v1 file gives the tensors that
// converting the original snapshot gives, bit for bit; otherwise it stays FP32.
#include <cstring>
#include <filesystem>

#include "common/float_bits.h"
#include "converter/sources/seed_names.h"
#include "converter/sources/snapshot.h"
#include "formats/iris_v1.h"

namespace iris {

namespace fs = std::filesystem;

namespace {

DType dtype_of(V1DType d) {
  switch (d) {
    case V1DType::kBF16: return DType::kBF16;
    case V1DType::kF32: return DType::kF32;
    case V1DType::kU8: return DType::kU8;
    case V1DType::kI32: return DType::kI32;
  }
  return DType::kU8;
}

// The BF16 halves of `f32` (n values) when every value is one exactly, else false.
bool narrow_exactly(std::span<const uint8_t> f32, std::vector<uint8_t>* out) {
  const size_t n = f32.size() / 4;
  out->resize(2 * n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, f32.data() + 4 * i, 4);
    if (u & 0xffffu) return false;  // low mantissa bits set (a NaN payload included)
    const uint16_t h = uint16_t(u >> 16);
    std::memcpy(out->data() + 2 * i, &h, 2);
  }
  return true;
}

}  // namespace

Result<Snapshot> Snapshot::open_v1(const std::string& v1_path, const std::string& config_source) {
  if (config_source.empty())
    return invalid_input(v1_path + ": a .iris v1 archive holds no config.json; give --config with the model's config.json (or the "
                                   "snapshot folder it came from)");
  IRIS_ASSIGN_OR_RETURN(V1Archive v1, V1Archive::open(v1_path));
  Snapshot s;
  std::error_code ec;
  if (fs::is_directory(config_source, ec)) {
    s.folder_ = config_source;
    IRIS_TRY(s.load_config());
    if (!s.config_json_) return invalid_input(config_source + ": no config.json in this folder (--config)");
    IRIS_TRY(s.load_aux_files());
  } else {
    IRIS_TRY(s.load_config_file(config_source));
  }
  if (s.config_.model_type != "gpt_oss")
    return invalid_input(config_source + ": model_type '" + s.config_.model_type + "', but a .iris v1 archive holds gpt-oss (gpt_oss) weights");
  s.resolved_from_ = ".iris v1 archive " + v1_path + ", config from " + config_source;

  std::vector<SafetensorsTensor> in_place, narrowed;
  auto buffer = std::make_unique<std::vector<uint8_t>>();
  for (const auto& e : v1.entries()) {
    auto hf = hf_name_of_seed(e.name);
    if (!hf) return invalid_input(v1_path + ": tensor '" + e.name + "' is not one of the seed engine's gpt-oss names");
    SafetensorsTensor t{*hf, dtype_of(e.dtype), e.shape, 1, e.offset, e.nbytes};
    for (auto d : e.shape) t.numel *= d;
    std::vector<uint8_t> half;
    if (seed_slot(*hf)->widened && e.dtype == V1DType::kF32 && narrow_exactly(v1.bytes(e), &half)) {
      t.dtype = DType::kBF16;
      t.offset = buffer->size();
      t.size = half.size();
      buffer->insert(buffer->end(), half.begin(), half.end());
      narrowed.push_back(std::move(t));
    } else {
      in_place.push_back(std::move(t));
    }
  }
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(v1_path));
  std::sort(in_place.begin(), in_place.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  s.shards_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::from_table(std::move(map), std::move(in_place))));
  if (!narrowed.empty()) {
    const std::span<const uint8_t> bytes(buffer->data(), buffer->size());
    s.owned_.push_back(std::move(buffer));
    s.shards_.push_back(
        std::make_unique<SafetensorsFile>(SafetensorsFile::from_table(MappedFile::borrow(bytes, v1_path + " (norms and sinks narrowed to BF16)"), std::move(narrowed))));
  }
  for (const auto& sh : s.shards_)
    for (const auto& t : sh->tensors()) s.tensors_.push_back({sh.get(), &t});
  s.index_names();
  return s;
}

}  // namespace iris
