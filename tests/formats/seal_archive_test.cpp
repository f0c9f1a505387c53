// The archive fuzz target's sealing step (tests/fuzz/seal_archive.h) does what it is for: a
// mutation that only a checksum would catch reaches the decoders once sealed, and a valid
// archive sealed opens to the same manifest.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "formats/iris_archive.h"
#include "formats/iris_writer.h"
#include "tests/fuzz/seal_archive.h"
#include "tests/test_files.h"
#include "verify/checksums.h"

namespace iris {
namespace {

std::vector<uint8_t> small_archive() {
  testing_files::TempDir d;
  IrisWriter w;
  w.set_model_type("llama");
  TensorDesc t;
  t.name = "w.weight";
  t.shape = {4, 8};
  t.dtype = DType::kBF16;
  w.add_tensor(t, nlohmann::json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(64, 0x3f)); }});
  w.add_file("config.json", R"({"model_type":"llama"})");
  EXPECT_TRUE(w.write(d / "a.iris", {}).is_ok());
  const std::string bytes = testing_files::read_all(d / "a.iris");
  return {bytes.begin(), bytes.end()};
}

uint64_t failed_checks(std::span<const uint8_t> bytes) {
  auto a = IrisArchive::open_memory(bytes, "a.iris");
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  if (!a.is_ok()) return ~uint64_t(0);
  VerifyReport r;
  verify_checksums(*a, &r, nullptr);
  return r.failures();
}

TEST(SealArchive, AValidArchiveStaysValid) {
  const auto good = small_archive();
  const auto sealed = fuzz::seal_archive(good.data(), good.size());
  EXPECT_EQ(failed_checks(sealed), 0u);
  auto a = IrisArchive::open_memory(good, "a.iris");
  auto b = IrisArchive::open_memory(sealed, "a.iris");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(manifest_to_json(a->manifest()), manifest_to_json(b->manifest()));
}

TEST(SealArchive, DataAndManifestMutationsPassTheChecksumsOnceSealed) {
  auto bytes = small_archive();
  const uint64_t data_offset = fuzz::read_u64(bytes.data() + 32);
  bytes[data_offset] ^= 0x40;  // the tensor's first byte
  EXPECT_EQ(failed_checks(bytes), 1u);  // unsealed: the component checksum catches it
  EXPECT_EQ(failed_checks(fuzz::seal_archive(bytes.data(), bytes.size())), 0u);

  auto m = small_archive();
  std::string text(reinterpret_cast<const char*>(m.data()) + 64, fuzz::read_u64(m.data() + 24));
  const size_t at = text.find("\"llama\"");
  ASSERT_NE(at, std::string::npos);
  m[64 + at + 1] = 'x';  // model_type "xlama": only the manifest checksum would catch it
  EXPECT_FALSE(IrisArchive::open_memory(m, "a.iris").is_ok());
  const auto sealed = fuzz::seal_archive(m.data(), m.size());
  auto opened = IrisArchive::open_memory(sealed, "a.iris");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  EXPECT_EQ(opened->manifest().model_type, "xlama");
}

}  // namespace
}  // namespace iris
