// libFuzzer target: the archive readers (v2, and the seed engine's v1), verify and the export
// decode path, over a buffer. Whatever the bytes, opening either fails with a Status or
// yields an archive whose checks and decodes run without a crash, a hang or a sanitizer
// report.
#include <cstdint>
#include <vector>

#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "formats/tensor_decode.h"
#include "verify/checksums.h"
#include "verify/v1_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  if (auto v1 = V1Archive::open_memory({data, size}, "fuzz.v1.iris"); v1.is_ok()) {
    (void)verify_v1_structure(*v1).to_json();
    for (const auto& e : v1->entries()) (void)v1->bytes(e);
    return 0;
  }
  auto a = IrisArchive::open_memory({data, size}, "fuzz.iris");
  if (!a.is_ok()) return 0;
  VerifyReport report;
  verify_checksums(*a, &report, nullptr);
  (void)report.to_json();
  for (const auto& f : a->manifest().files) (void)a->read_file(f.name);
  for (const auto& t : a->manifest().tensors) {
    const RowView v = row_view(t.desc);
    if (v.rows == 0 || v.k == 0 || v.rows * v.k > (1u << 16)) continue;  // bounded work per input
    std::vector<float> out(v.rows * v.k);
    (void)decode_rows(t.desc, a->component_bytes(t), 0, v.rows, DType::kF32, out.data());
  }
  return 0;
}
