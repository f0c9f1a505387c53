// libFuzzer target: the archive readers (v2, and the seed engine's v1), verify (checksums and
// value checks) and the export decode path, over a buffer. Whatever the bytes, opening either
// fails with a Status or yields an archive whose checks and decodes run without a crash, a
// hang or a sanitizer report. Each input runs twice: as it is, and sealed (seal_archive.h:
// its checksums made true again), so mutations reach the manifest's validation and the
// decoders rather than stopping at a checksum.
#include <cstdint>
#include <vector>

#include "formats/iris_archive.h"
#include "formats/iris_v1.h"
#include "formats/tensor_decode.h"
#include "verify/checksums.h"
#include "verify/v1_checks.h"
#include "verify/value_checks.h"
#include "tests/fuzz/seal_archive.h"

namespace {

void run_archive(const uint8_t* data, size_t size) {
  using namespace iris;
  auto a = IrisArchive::open_memory({data, size}, "fuzz.iris");
  if (!a.is_ok()) return;
  VerifyReport report;
  verify_checksums(*a, &report, nullptr);
  verify_values(*a, &report);
  (void)report.to_json();
  for (const auto& f : a->manifest().files) (void)a->read_file(f.name);
  for (const auto& t : a->manifest().tensors) {
    const RowView v = row_view(t.desc);
    if (v.rows == 0 || v.k == 0 || v.rows * v.k > (1u << 16)) continue;  // bounded work per input
    std::vector<float> out(v.rows * v.k);
    (void)decode_rows(t.desc, a->component_bytes(t), 0, v.rows, DType::kF32, out.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace iris;
  if (auto v1 = V1Archive::open_memory({data, size}, "fuzz.v1.iris"); v1.is_ok()) {
    (void)verify_v1_structure(*v1).to_json();
    for (const auto& e : v1->entries()) (void)v1->bytes(e);
    return 0;
  }
  run_archive(data, size);
  const std::vector<uint8_t> sealed = fuzz::seal_archive(data, size);
  // (An empty input has no pointer to compare: memcmp must not see it.)
  if (sealed.size() != size || (size > 0 && std::memcmp(sealed.data(), data, size) != 0)) run_archive(sealed.data(), sealed.size());
  return 0;
}
