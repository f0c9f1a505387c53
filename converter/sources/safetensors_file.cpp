#include "converter/sources/safetensors_file.h"

#include "formats/names.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "common/checked_math.h"
#include "converter/sources/foreign_formats.h"
#include "common/name_index.h"
#include "converter/sources/safetensors_plain_header.h"
#include "formats/json_limits.h"

namespace iris {

namespace {

using nlohmann::json;

std::string tensor_ctx(const std::string& path, const std::string& name) {
  return path + ": tensor '" + name + "': ";
}

// A JSON number that is a non-negative integer below `limit`.
bool read_u64(const json& j, uint64_t limit, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return *out < limit;
  }
  return false;  // negative, fractional or not a number
}

Status parse_entry(const std::string& path, const std::string& name, const json& e, SafetensorsTensor* t) {
  const std::string ctx = tensor_ctx(path, name);
  if (name.empty()) return invalid_input(path + ": a tensor has an empty name");
  if (const char* why = tensor_name_problem(name)) return invalid_input(tensor_ctx(path, escaped_name(name)) + why);
  if (!e.is_object()) return invalid_input(ctx + "entry is not a JSON object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || sh == e.end() || off == e.end())
    return invalid_input(ctx + "entry needs 'dtype', 'shape' and 'data_offsets'");
  if (!dt->is_string()) return invalid_input(ctx + "'dtype' is not a string");
  auto dtype = dtype_from_safetensors(dt->get<std::string>());
  if (!dtype) return invalid_input(ctx + "unknown dtype '" + dt->get<std::string>() + "'");
  if (!sh->is_array()) return invalid_input(ctx + "'shape' is not an array");
  if (sh->size() > SafetensorsFile::kMaxRank)
    return invalid_input(ctx + "rank " + std::to_string(sh->size()) + " exceeds " +
                         std::to_string(SafetensorsFile::kMaxRank));
  t->name = name;
  t->dtype = *dtype;
  t->shape.clear();
  for (const auto& d : *sh) {
    uint64_t v;
    if (!read_u64(d, SafetensorsFile::kMaxDim, &v))
      return invalid_input(ctx + "shape dimension " + d.dump() + " is not an integer in [0, 2^48)");
    t->shape.push_back(v);
  }
  if (!off->is_array() || off->size() != 2)
    return invalid_input(ctx + "'data_offsets' is not a [begin, end] pair");
  uint64_t b, en;
  if (!read_u64((*off)[0], SafetensorsFile::kMaxDim, &b) || !read_u64((*off)[1], SafetensorsFile::kMaxDim, &en))
    return invalid_input(ctx + "'data_offsets' " + off->dump() + " are not integers in [0, 2^48)");
  if (en < b) return invalid_input(ctx + "data_offsets end " + std::to_string(en) + " is before begin " + std::to_string(b));
  auto numel = checked_numel(t->shape);
  if (!numel) return invalid_input(ctx + "element count overflows 64 bits");
  t->numel = *numel;
  auto bytes = dtype_bytes(t->dtype, t->numel);
  if (!bytes) {
    if (checked_mul(t->numel, dtype_bits(t->dtype)))
      return invalid_input(ctx + std::to_string(t->numel) + " elements of " + std::string(dtype_st_name(t->dtype)) +
                           " do not fill whole bytes");
    return invalid_input(ctx + "byte size overflows 64 bits");
  }
  if (en - b != *bytes)
    return invalid_input(ctx + "data_offsets span " + std::to_string(en - b) + " bytes but shape and dtype need " +
                         std::to_string(*bytes));
  t->offset = b;  // relative for now
  t->size = *bytes;
  return Status::ok();
}

}  // namespace

// The header in one streaming pass, no document tree: each tensor entry (three keys) is built
// as a small JSON value and handed to parse_entry, so 10^6 tensors cost 10^6 small objects
// instead of one map of 10^6 nodes plus a second pass for duplicate keys. Duplicate keys (of
// tensors, or inside an entry) are refused here; nesting is bounded before parsing.
class HeaderReader : public nlohmann::json_sax<json> {
 public:
  HeaderReader(const std::string& path, std::vector<SafetensorsTensor>* tensors, std::map<std::string, std::string>* metadata)
      : path_(path), tensors_(tensors), metadata_(metadata) {}
  Status status = Status::ok();

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { return fail(invalid_input(path_ + ": header: binary values are not JSON")); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (stack_.size() == 1) {  // a tensor name or __metadata__
      if (k.size() > kMaxTensorNameBytes)
        return fail(invalid_input(path_ + ": a tensor name of " + std::to_string(k.size()) + " bytes exceeds the " +
                                  std::to_string(kMaxTensorNameBytes) + "-byte limit"));
      const bool repeated = k == "__metadata__" ? std::exchange(saw_metadata_, true) : seen_.find(k) != seen_.npos;
      if (repeated) return fail(invalid_input(path_ + ": header: duplicate key '" + k + "'"));
      top_key_ = k;
      return true;
    }
    json& o = *stack_.back();
    if (o.contains(k)) return fail(invalid_input(path_ + ": header: duplicate key '" + k + "'"));
    pending_key_ = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(invalid_input(path_ + ": header: invalid JSON: " + json_error_text(e)));
  }
  bool saw_object() const { return saw_root_object_; }

 private:
  bool fail(Status s) {
    if (status.is_ok()) status = std::move(s);
    return false;
  }
  // A finished value: the root, a tensor entry / metadata object, or part of one.
  bool value(json v) {
    if (stack_.empty()) return fail(invalid_input(path_ + ": header is not a JSON object"));
    json& parent = *stack_.back();
    if (stack_.size() == 1) return finish_entry(std::move(v));
    if (parent.is_array()) parent.push_back(std::move(v));
    else parent[pending_key_] = std::move(v);
    return true;
  }
  bool open(json fresh) {  // depth: bounded by the json_nesting_depth check before parsing
    if (stack_.empty()) {
      if (!fresh.is_object()) return fail(invalid_input(path_ + ": header is not a JSON object"));
      saw_root_object_ = true;
      root_ = std::move(fresh);
      stack_.push_back(&root_);
      return true;
    }
    if (stack_.size() == 1) {
      entry_ = std::move(fresh);
      stack_.push_back(&entry_);
      return true;
    }
    json& parent = *stack_.back();
    json* child = parent.is_array() ? &(parent.emplace_back(std::move(fresh))) : &(parent[pending_key_] = std::move(fresh));
    stack_.push_back(child);
    return true;
  }
  bool close() {
    if (stack_.empty()) return false;
    stack_.pop_back();
    if (stack_.size() == 1) return finish_entry(std::move(entry_));
    return true;
  }
  bool finish_entry(json e) {
    if (top_key_ == "__metadata__") {
      if (!e.is_object()) return fail(invalid_input(path_ + ": __metadata__ is not an object"));
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m->is_string()) return fail(invalid_input(path_ + ": __metadata__ value of '" + m.key() + "' is not a string"));
        (*metadata_)[m.key()] = m->get<std::string>();
      }
      return true;
    }
    SafetensorsTensor t;
    Status st = parse_entry(path_, top_key_, e, &t);
    if (!st.is_ok()) return fail(std::move(st));
    tensors_->push_back(std::move(t));
    seen_.insert(tensors_->size() - 1);
    return true;
  }

  // The names seen so far, as positions in *tensors_ (read through the vector, whose buffer
  // moves as it grows): a set of the names themselves held a third copy of every name.
  struct GrowingNames {
    const std::vector<SafetensorsTensor>* tensors;
    std::string_view operator()(size_t i) const { return (*tensors)[i].name; }
  };

  static constexpr size_t kMaxTensorNameBytes = 4096;
  const std::string& path_;
  std::vector<SafetensorsTensor>* tensors_;
  std::map<std::string, std::string>* metadata_;
  json root_, entry_;
  std::vector<json*> stack_;
  NameIndex<GrowingNames> seen_{GrowingNames{tensors_}};
  bool saw_metadata_ = false;
  std::string top_key_, pending_key_;
  bool saw_root_object_ = false;
};


namespace {

// The plain reader (safetensors_plain_header.h), and no name twice: the full reader refuses
// a duplicate as it meets it, before any later check.
bool parse_plain_header(std::string_view header, std::vector<SafetensorsTensor>* tensors,
                        std::map<std::string, std::string>* metadata) {
  if (!parse_plain_safetensors_header(header, tensors, metadata)) return false;
  NameIndex names(TensorNames{tensors->data()});
  names.reserve(tensors->size());
  for (size_t i = 0; i < tensors->size(); ++i)
    if (names.insert(i) != names.npos) return false;
  return true;
}

}  // namespace

Status read_safetensors_header_entries(const std::string& path, std::string_view header, std::vector<SafetensorsTensor>* tensors,
                                       std::map<std::string, std::string>* metadata) {
  tensors->clear();
  metadata->clear();
  if (json_nesting_depth(header) > kMaxJsonDepth)
    return invalid_input(path + ": header: JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  HeaderReader reader(path, tensors, metadata);
  const bool ok = json::sax_parse(header.begin(), header.end(), &reader);
  if (!reader.status.is_ok()) return reader.status;
  if (!ok || !reader.saw_object()) return invalid_input(path + ": header is not a JSON object");
  return Status::ok();
}

Status parse_safetensors_header(const std::string& path, std::string_view header, uint64_t data_size,
                                std::vector<SafetensorsTensor>* tensors,
                                std::map<std::string, std::string>* metadata) {
  if (!parse_plain_header(header, tensors, metadata))  // else the full reader, which says what is wrong
    IRIS_TRY(read_safetensors_header_entries(path, header, tensors, metadata));
  // Contiguous, gap-free, non-overlapping, and covering the buffer exactly (FORMATS.md 1.3 rules 6, 8).
  // (Writers list tensors in offset order: then there is nothing to sort, and no 10^6-entry
  // merge buffer is allocated for it.)
  const auto by_offset = [](const auto& a, const auto& b) { return a.offset != b.offset ? a.offset < b.offset : a.size < b.size; };
  if (!std::is_sorted(tensors->begin(), tensors->end(), by_offset)) std::stable_sort(tensors->begin(), tensors->end(), by_offset);
  uint64_t expect = 0;
  for (const auto& t : *tensors) {
    if (t.offset != expect) {
      return invalid_input(tensor_ctx(path, t.name) + "data_offsets begin " + std::to_string(t.offset) +
                           (t.offset < expect ? " overlaps the previous tensor (which ends at "
                                              : " leaves a gap after the previous tensor (which ends at ") +
                           std::to_string(expect) + ")");
    }
    expect = t.offset + t.size;
  }
  if (expect != data_size)
    return invalid_input(path + ": tensors cover " + std::to_string(expect) + " data bytes but the file holds " +
                         std::to_string(data_size) + (expect > data_size ? " (truncated file?)" : " (trailing bytes)"));
  return Status::ok();
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // Shards come by the hundred: none keeps a descriptor (MappedFile::Descriptor::kOnDemand).
  IRIS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path, MappedFile::Descriptor::kOnDemand));
  return from_map(std::move(map));
}

Result<SafetensorsFile> SafetensorsFile::open_memory(std::span<const uint8_t> bytes, const std::string& name) {
  return from_map(MappedFile::borrow(bytes, name));
}

SafetensorsFile SafetensorsFile::from_table(MappedFile map, std::vector<SafetensorsTensor> tensors) {
  SafetensorsFile f;
  f.map_ = std::move(map);
  f.file_name_ = std::filesystem::path(f.map_.path()).filename().string();
  f.tensors_ = std::move(tensors);
  f.index_ = SafetensorsIndex(TensorNames{f.tensors_.data()});
  f.index_.reserve(f.tensors_.size());
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.insert(i);
  return f;
}

Result<SafetensorsFile> SafetensorsFile::from_map(MappedFile map) {
  SafetensorsFile f;
  f.map_ = std::move(map);
  f.file_name_ = std::filesystem::path(f.map_.path()).filename().string();
  const std::string path = f.map_.path();
  const uint64_t size = f.map_.size();
  if (auto hint = foreign_format_hint({f.map_.data(), size_t(std::min<uint64_t>(size, 16))})) return unsupported(path + ": " + *hint);
  if (size < 8) return invalid_input(path + ": file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t n;
  std::memcpy(&n, f.map_.data(), 8);  // little-endian host assumed (x86-64, aarch64)
  if (n > kMaxHeaderSize)
    return invalid_input(path + ": header length " + std::to_string(n) + " exceeds the 100000000-byte limit");
  if (n > size - 8)
    return invalid_input(path + ": header length " + std::to_string(n) + " runs past the end of the " +
                         std::to_string(size) + "-byte file");
  std::string_view header(reinterpret_cast<const char*>(f.map_.data()) + 8, size_t(n));
  IRIS_TRY(parse_safetensors_header(path, header, size - 8 - n, &f.tensors_, &f.metadata_));
  // The header's pages are read once: the names were copied, so they leave the resident set
  // (98 MB of a 10^6-tensor header otherwise counted until exit).
  f.map_.release(0, 8 + n);
  f.index_ = SafetensorsIndex(TensorNames{f.tensors_.data()});
  f.index_.reserve(f.tensors_.size());
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    f.tensors_[i].offset += 8 + n;
    f.index_.insert(i);
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const size_t i = index_.find(name);
  return i == index_.npos ? nullptr : &tensors_[i];
}

}  // namespace iris
