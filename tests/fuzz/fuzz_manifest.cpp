// libFuzzer target: the fast manifest reader (formats/manifest_fast.cpp, a scanner of the
// writer's spelling) against the reference reader (nlohmann's parser), differentially. Input:
// 8 bytes of the data section's size, then the manifest text. Whatever the text: neither
// reader crashes or hangs; the fast reader accepts nothing the reference refuses and reads
// the same manifest when it accepts; read_manifest() (what every open calls) answers exactly
// what the reference answers, message for message. A disagreement aborts, so the fuzzer
// reports it as a crash with its input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "formats/iris_preamble.h"
#include "formats/manifest.h"
#include "formats/manifest_text.h"

namespace {

std::string verdict(const iris::Result<iris::Manifest>& m) {
  using nlohmann::json;
  return m.is_ok() ? "ok: " + iris::manifest_to_json(*m).dump(-1, ' ', false, json::error_handler_t::replace)
                   : "refused: " + m.status().message();
}

[[noreturn]] void disagree(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "%s\n  fast/read_manifest: %.400s\n  reference:          %.400s\n", what, a.c_str(), b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  if (size < 8) return 0;
  uint64_t data_size;
  std::memcpy(&data_size, data, 8);
  data_size &= (uint64_t(1) << 40) - 1;  // sizes a real archive could have
  const std::string_view text(reinterpret_cast<const char*>(data) + 8, size - 8);
  const std::string path = "fuzz.iris";
  const std::string reference = verdict(read_manifest_parsed(text, data_size, kIrisVersionMajor, kIrisVersionMinor, path));
  TensorIndex index;
  if (auto fast = read_manifest_fast(text, data_size, kIrisVersionMajor, kIrisVersionMinor, path, &index)) {
    const std::string got = verdict(Result<Manifest>(std::move(*fast)));
    if (got != reference) disagree("the fast reader accepted what the reference reads otherwise", got, reference);
  }
  TensorIndex index2;
  const std::string answer = verdict(read_manifest(text, data_size, kIrisVersionMajor, kIrisVersionMinor, path, &index2));
  if (answer != reference) disagree("read_manifest answered otherwise than the reference", answer, reference);
  return 0;
}
