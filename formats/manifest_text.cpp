#include "formats/manifest_text.h"

#include "formats/json_limits.h"

namespace iris {

Result<Manifest> read_manifest_parsed(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                                      const std::string& path) {
  // Each tensor entry is read as soon as it is parsed and its small document freed: the
  // manifest is never one document. The reader keeps the first error and reports it after the
  // parse, duplicate and version checks.
  ManifestReader reader(data_size, path);
  IRIS_ASSIGN_OR_RETURN(auto j, parse_untrusted_json_streaming(text, path + ": manifest", "tensors",
                                                               [&](nlohmann::json& t) { reader.add_tensor(t); }));
  IRIS_TRY(check_manifest_version(j, major, minor, path));
  return reader.finish(std::move(j));
}

Result<Manifest> read_manifest(std::string_view text, uint64_t data_size, uint16_t major, uint16_t minor,
                               const std::string& path, TensorIndex* index) {
  if (auto m = read_manifest_fast(text, data_size, major, minor, path, index)) return std::move(*m);
  IRIS_ASSIGN_OR_RETURN(Manifest m, read_manifest_parsed(text, data_size, major, minor, path));
  if (!index->build(m.tensors)) return internal_error(path + ": manifest: a tensor name is listed twice, yet was read");
  return m;
}

}  // namespace iris
