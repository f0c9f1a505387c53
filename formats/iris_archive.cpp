#include "formats/iris_archive.h"

#include <zstd.h>

#include "common/hashing.h"
#include "formats/json_limits.h"

namespace iris {

Result<IrisArchive> IrisArchive::open(const std::string& path) {
  IrisArchive a;
  IRIS_ASSIGN_OR_RETURN(a.map_, MappedFile::open(path));
  IRIS_ASSIGN_OR_RETURN(a.preamble_, decode_preamble(a.map_.data(), a.map_.size(), path));
  std::string_view text(reinterpret_cast<const char*>(a.map_.data()) + a.preamble_.manifest_offset,
                        a.preamble_.manifest_size);
  if (xxh3_64(text.data(), text.size()) != a.preamble_.manifest_xxh3)
    return invalid_input(path + ": manifest checksum mismatch (corrupt manifest)");
  IRIS_ASSIGN_OR_RETURN(auto j, parse_untrusted_json(text, path + ": manifest"));
  IRIS_ASSIGN_OR_RETURN(a.manifest_, manifest_from_json(j, a.preamble_.data_size, path));
  return a;
}

const ArchiveTensor* IrisArchive::find(const std::string& name) const {
  for (const auto& t : manifest_.tensors)
    if (t.desc.name == name) return &t;
  return nullptr;
}

Result<std::string> IrisArchive::read_file(const std::string& name) const {
  for (const auto& f : manifest_.files) {
    if (f.name != name) continue;
    auto b = bytes(f);
    if (xxh3_64(b.data(), b.size()) != f.xxh3) return invalid_input(path() + ": embedded file '" + name + "': checksum mismatch");
    if (f.encoding == "raw") return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    std::string out(f.raw_size, '\0');
    size_t n = ZSTD_decompress(out.data(), out.size(), b.data(), b.size());
    if (ZSTD_isError(n) || n != f.raw_size) return invalid_input(path() + ": embedded file '" + name + "': cannot decompress");
    return out;
  }
  return invalid_input(path() + ": no embedded file '" + name + "'");
}

}  // namespace iris
