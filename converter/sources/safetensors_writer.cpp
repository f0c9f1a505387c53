#include "converter/sources/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "common/atomic_output.h"
#include "common/checked_math.h"

namespace iris {

namespace {

class OffsetSink final : public ByteSink {
 public:
  OffsetSink(AtomicOutputFile* out, uint64_t offset, uint64_t expected, std::string what,
             const std::function<void(uint64_t)>& on_bytes)
      : out_(out), offset_(offset), expected_(expected), what_(std::move(what)), on_bytes_(on_bytes) {}
  Status write(std::span<const uint8_t> b) override {
    if (written_ + b.size() > expected_) return internal_error(what_ + ": more bytes than planned");
    IRIS_TRY(out_->write_at(offset_ + written_, b));
    written_ += b.size();
    on_bytes_(b.size());
    return Status::ok();
  }
  Status finish() const {
    if (written_ != expected_) return internal_error(what_ + ": wrote " + std::to_string(written_) + " of " + std::to_string(expected_) + " bytes");
    return Status::ok();
  }

 private:
  AtomicOutputFile* out_;
  uint64_t offset_, expected_;
  std::string what_;
  const std::function<void(uint64_t)>& on_bytes_;
  uint64_t written_ = 0;
};

}  // namespace

Status write_safetensors(const std::string& path, std::vector<SafetensorsEntry> entries,
                         const SafetensorsWriteOptions& options) {
  std::unordered_set<std::string> names;
  for (const auto& e : entries)
    if (!names.insert(e.name).second) return internal_error(path + ": tensor '" + e.name + "' exported twice");
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    if (a.dtype != b.dtype) return static_cast<int>(a.dtype) > static_cast<int>(b.dtype);
    return a.name < b.name;
  });
  nlohmann::ordered_json header;
  if (!options.metadata.empty()) {
    nlohmann::ordered_json md;
    for (const auto& [k, v] : options.metadata) md[k] = v;
    header["__metadata__"] = md;
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    auto bytes = dtype_bytes(e.dtype, *checked_numel(e.shape));
    if (!bytes) return internal_error(path + ": tensor '" + e.name + "' does not fill whole bytes");
    header[e.name] = {{"dtype", std::string(dtype_st_name(e.dtype))}, {"shape", e.shape}, {"data_offsets", {offset, offset + *bytes}}};
    sizes.push_back(*bytes);
    offset += *bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile out, AtomicOutputFile::create(path, options.overwrite, options.partial_files));
  uint8_t len[8];
  std::memcpy(len, &n, 8);
  IRIS_TRY(out.write_at(0, {len, 8}));
  IRIS_TRY(out.write_at(8, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  uint64_t done = 0, pos = 8 + n;
  std::function<void(uint64_t)> on_bytes = [&](uint64_t b) {
    done += b;
    if (options.progress) options.progress(done, offset);
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    OffsetSink sink(&out, pos, sizes[i], "tensor '" + entries[i].name + "'", on_bytes);
    IRIS_TRY(entries[i].producer(sink));
    IRIS_TRY(sink.finish());
    pos += sizes[i];
  }
  IRIS_TRY(out.pad_to(pos));
  return out.commit();
}

}  // namespace iris
