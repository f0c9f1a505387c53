#include "converter/sources/safetensors_plain_header.h"

#include "common/checked_math.h"
#include "formats/names.h"

namespace iris {

namespace {

// A cursor over the header. Every method returns false where the full reader would either
// fail or need more than this reader takes; none of them reports why.
class PlainHeader {
 public:
  explicit PlainHeader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool read(std::vector<SafetensorsTensor>* tensors, std::map<std::string, std::string>* metadata) {
    bool saw_metadata = false;
    if (!punct('{')) return false;
    if (!punct('}')) {
      do {
        std::string_view key;
        if (!string(&key) || !punct(':')) return false;
        if (key == "__metadata__") {
          if (saw_metadata || !read_metadata(metadata)) return false;
          saw_metadata = true;
        } else {
          // The full reader's checks on a name: its length limit, then parse_entry's.
          if (key.empty() || key.size() > kMaxTensorNameBytes || tensor_name_problem(key)) return false;
          SafetensorsTensor& t = tensors->emplace_back();
          t.name = key;
          if (!read_entry(&t)) return false;
        }
      } while (punct(','));
      if (!punct('}')) return false;
    }
    skip_space();
    return p_ == end_;  // nothing but whitespace after the object
  }

 private:
  static constexpr size_t kMaxTensorNameBytes = 4096;  // HeaderReader's limit
  static constexpr int kMaxDigits = 15;                // 2^48, the largest value taken, has 15

  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool punct(char c) {
    skip_space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // A string of printable ASCII without escapes: its text is its value.
  bool string(std::string_view* out) {
    if (!punct('"')) return false;
    const char* from = p_;
    while (p_ < end_ && *p_ != '"') {
      const auto c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c >= 0x7F || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = {from, size_t(p_ - from)};
    ++p_;
    return true;
  }
  // A non-negative integer below 2^48 written plainly: no sign, fraction, exponent or
  // leading zero (which the full reader takes as other kinds of number, or refuses).
  bool integer(uint64_t* out) {
    skip_space();
    const char* from = p_;
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9' && p_ - from < kMaxDigits) v = v * 10 + uint64_t(*p_++ - '0');
    const size_t digits = size_t(p_ - from);
    if (digits == 0 || (digits > 1 && *from == '0') || v >= SafetensorsFile::kMaxDim) return false;
    *out = v;
    // What follows must end the number: a digit here (a 16th), '.', 'e' or 'E' is another number.
    return p_ < end_ && (*p_ == ',' || *p_ == ']' || *p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t');
  }
  bool integers(std::vector<uint64_t>* out, size_t max_count) {
    if (!punct('[')) return false;
    if (punct(']')) return true;
    do {
      uint64_t v;
      if (out->size() == max_count || !integer(&v)) return false;
      out->push_back(v);
    } while (punct(','));
    return punct(']');
  }
  bool read_metadata(std::map<std::string, std::string>* metadata) {
    if (!punct('{')) return false;
    if (punct('}')) return true;
    do {
      std::string_view key, value;
      if (!string(&key) || !punct(':') || !string(&value)) return false;
      if (!metadata->emplace(key, value).second) return false;  // a duplicate key
    } while (punct(','));
    return punct('}');
  }
  // The three keys once each, in any order, and nothing else; then parse_entry's rules.
  bool read_entry(SafetensorsTensor* t) {
    if (!punct('{')) return false;
    bool dtype = false, shape = false, offsets = false;
    std::vector<uint64_t> range;
    do {
      std::string_view key;
      if (!string(&key) || !punct(':')) return false;
      if (key == "dtype" && !dtype) {
        std::string_view name;
        if (!string(&name)) return false;
        auto d = dtype_from_safetensors(name);
        if (!d) return false;
        t->dtype = *d;
        dtype = true;
      } else if (key == "shape" && !shape) {
        if (!integers(&t->shape, SafetensorsFile::kMaxRank)) return false;
        shape = true;
      } else if (key == "data_offsets" && !offsets) {
        if (!integers(&range, 2) || range.size() != 2) return false;
        offsets = true;
      } else {
        return false;
      }
    } while (punct(','));
    if (!punct('}') || !dtype || !shape || !offsets || range[1] < range[0]) return false;
    const auto numel = checked_numel(t->shape);
    if (!numel) return false;
    const auto bytes = dtype_bytes(t->dtype, *numel);
    if (!bytes || *bytes != range[1] - range[0]) return false;
    t->numel = *numel;
    t->offset = range[0];
    t->size = *bytes;
    return true;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

bool parse_plain_safetensors_header(std::string_view header, std::vector<SafetensorsTensor>* tensors,
                                    std::map<std::string, std::string>* metadata) {
  tensors->clear();
  metadata->clear();
  return PlainHeader(header).read(tensors, metadata);
}

}  // namespace iris
