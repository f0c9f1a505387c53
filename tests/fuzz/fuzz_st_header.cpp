// libFuzzer target: the plain safetensors header reader (converter/sources/safetensors_plain_header.h,
// a scanner of the common spelling) against the full reader (nlohmann's SAX parser),
// differentially. Input: the header text. Whatever it is, neither reader crashes or hangs,
// and when the plain reader takes a header with no name twice (what parse_safetensors_header
// then uses), the full reader accepts it too with the same tensors, in the same order, and
// the same metadata. A disagreement aborts, so the fuzzer reports it with its input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "converter/sources/safetensors_file.h"
#include "converter/sources/safetensors_plain_header.h"

namespace {

std::string describe(const std::vector<iris::SafetensorsTensor>& ts, const std::map<std::string, std::string>& md) {
  std::string s;
  for (const auto& t : ts) {
    s += t.name + " " + std::to_string(int(t.dtype)) + " [";
    for (uint64_t d : t.shape) s += std::to_string(d) + ",";
    s += "] " + std::to_string(t.numel) + " " + std::to_string(t.offset) + " " + std::to_string(t.size) + "\n";
  }
  for (const auto& [k, v] : md) s += "meta " + k + "=" + v + "\n";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  std::vector<SafetensorsTensor> plain, full;
  std::map<std::string, std::string> plain_md, full_md;
  const Status ref = read_safetensors_header_entries("fuzz.safetensors", header, &full, &full_md);
  if (!parse_plain_safetensors_header(header, &plain, &plain_md)) return 0;
  std::set<std::string> names;
  for (const auto& t : plain)
    if (!names.insert(t.name).second) return 0;  // parse_safetensors_header declines it too
  if (!ref.is_ok()) {
    std::fprintf(stderr, "the plain reader took a header the full reader refuses: %s\n", ref.message().c_str());
    std::abort();
  }
  const std::string a = describe(plain, plain_md), b = describe(full, full_md);
  if (a != b) {
    std::fprintf(stderr, "the readers disagree\n  plain: %.600s\n  full:  %.600s\n", a.c_str(), b.c_str());
    std::abort();
  }
  return 0;
}
