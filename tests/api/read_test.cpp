// The C API reads what `iris convert` wrote: every tensor, component and embedded file, by
// index and by name, with checksums recomputed here by xxHash itself (an independent oracle).
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <vector>
#include <cstring>
#include <nlohmann/json.hpp>

#include "iris/iris.hpp"
#include "tests/api/capi_fixture.h"

namespace iris::capi_test {
namespace {

const char* const kFixtures[] = {"gptoss-mxfp4", "llama-bf16", "llama-nf4-dq", "llama-fp8-block"};

TEST(CApi, AbiVersionAndNames) {
  EXPECT_EQ(iris_abi_version(), uint32_t(IRIS_ABI_VERSION));
  EXPECT_STREQ(iris_status_name(IRIS_ERR_CORRUPT), "IRIS_ERR_CORRUPT");
  EXPECT_STREQ(iris_format_name(IRIS_FORMAT_NF4), "nf4");
  EXPECT_STREQ(iris_format_name(IRIS_FORMAT_FP8_E4M3), "fp8_e4m3");
  EXPECT_STREQ(iris_role_name(IRIS_ROLE_NESTED_CODE_TABLE), "nested_code_table");
  EXPECT_STREQ(iris_dtype_name(IRIS_DTYPE_BF16), "bf16");
  EXPECT_EQ(iris_dtype_bits(IRIS_DTYPE_F8_E4M3), 8u);
  EXPECT_STREQ(iris_format_name(static_cast<iris_format>(99)), "unknown");
  const char text[] = "iris checksums, any length: 0, 1-16, 17-128, 129-240 and longer take different paths";
  for (size_t n : {size_t(0), size_t(1), size_t(16), size_t(17), size_t(128), size_t(129), sizeof text - 1})
    EXPECT_EQ(iris_xxh3_64(text, n), XXH3_64bits(text, n)) << n;
  std::vector<uint8_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 2654435761u >> 13);
  EXPECT_EQ(iris_xxh3_64(big.data(), big.size()), XXH3_64bits(big.data(), big.size()));
}

// Everything the manifest says (parsed here with nlohmann, not through iris) is what the
// C API reports, and every component's bytes hash to the manifest's checksum.
TEST(CApi, EveryTensorComponentAndFileMatchesTheManifest) {
  for (const char* fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    iris_status st;
    std::string msg;
    auto a = open_archive(converted(fixture), &st, &msg);
    ASSERT_EQ(st, IRIS_OK) << msg;
    size_t msize = 0;
    const char* mtext = iris_archive_manifest(a.get(), &msize);
    const auto manifest = nlohmann::json::parse(std::string(mtext, msize));
    ASSERT_EQ(iris_archive_tensor_count(a.get()), manifest["tensors"].size());
    EXPECT_EQ(iris_archive_model_type(a.get()), manifest["model_type"].get<std::string>());
    uint32_t major = 0, minor = 0;
    iris_archive_format_version(a.get(), &major, &minor);
    EXPECT_EQ(major, 2u);
    for (uint64_t i = 0; i < manifest["tensors"].size(); ++i) {
      const auto& tj = manifest["tensors"][i];
      iris_tensor_info info;
      ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
      EXPECT_EQ(info.name, tj["name"].get<std::string>());
      uint64_t found = ~0ull;
      ASSERT_EQ(iris_archive_find_tensor(a.get(), info.name, &found, nullptr, 0), IRIS_OK);
      EXPECT_EQ(found, i);
      ASSERT_EQ(info.ndim, tj["shape"].size());
      uint64_t numel = 1;
      for (uint32_t d = 0; d < info.ndim; ++d) {
        EXPECT_EQ(info.shape[d], tj["shape"][d].get<uint64_t>());
        numel *= info.shape[d];
      }
      EXPECT_EQ(info.numel, numel);
      EXPECT_STREQ(iris_dtype_name(info.dtype), tj["dtype"].get<std::string>().c_str());
      const std::string fmt = tj["format"];
      if (info.format == IRIS_FORMAT_RAW) EXPECT_EQ(fmt, tj["dtype"].get<std::string>());
      else EXPECT_EQ(fmt, iris_format_name(info.format));
      EXPECT_EQ(info.layout.kind == IRIS_LAYOUT_TILED, tj["layout"]["kind"] == "tiled");
      if (info.layout.kind == IRIS_LAYOUT_TILED) {
        EXPECT_EQ(info.layout.tile_n, tj["layout"]["tile_n"].get<uint64_t>());
        EXPECT_EQ(info.layout.padded_k, tj["layout"]["padded_k"].get<uint64_t>());
      }
      if (info.format == IRIS_FORMAT_NF4) {
        EXPECT_EQ(info.params.block_size, tj["params"]["block_size"].get<uint32_t>());
        EXPECT_EQ(info.params.double_quant, tj["params"]["double_quant"].get<bool>() ? 1 : 0);
        EXPECT_EQ(info.params.nested_offset, float(tj["params"]["nested_offset"].get<double>()));
      }
      if (info.format == IRIS_FORMAT_FP8_E4M3) {
        EXPECT_EQ(info.params.granularity, IRIS_SCALE_BLOCK);
        EXPECT_EQ(info.params.block_n, tj["params"]["block_n"].get<uint64_t>());
      }
      ASSERT_EQ(info.n_components, tj["components"].size());
      for (uint32_t c = 0; c < info.n_components; ++c) {
        const auto& cj = tj["components"][c];
        iris_component_info ci;
        ASSERT_EQ(iris_archive_component(a.get(), i, c, &ci, nullptr, 0), IRIS_OK);
        EXPECT_STREQ(iris_role_name(ci.role), cj["role"].get<std::string>().c_str());
        EXPECT_EQ(ci.size, cj["bytes"].get<uint64_t>());
        EXPECT_EQ(ci.file_offset % 4096, 0u);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(ci.data, ci.size));
        EXPECT_EQ(std::string(hex), cj["xxh3"].get<std::string>()) << info.name << "/" << iris_role_name(ci.role);
        iris_component_info by_role;
        ASSERT_EQ(iris_archive_find_component(a.get(), i, ci.role, &by_role, nullptr, 0), IRIS_OK);
        EXPECT_EQ(by_role.data, ci.data);
      }
      EXPECT_EQ(iris_tensor_verify(a.get(), i, nullptr, 0), IRIS_OK);
    }
    EXPECT_EQ(iris_archive_verify(a.get(), 0, nullptr, 0), IRIS_OK);
    // Embedded config.json is the snapshot's file.
    bool has_config = false;
    for (uint64_t f = 0; f < iris_archive_file_count(a.get()); ++f) has_config |= std::string(iris_archive_file_name(a.get(), f)) == "config.json";
    ASSERT_TRUE(has_config);
    size_t size = 0;
    ASSERT_EQ(iris_archive_read_file(a.get(), "config.json", nullptr, 0, &size, nullptr, 0), IRIS_OK);
    std::string text(size, '\0');
    EXPECT_EQ(iris_archive_read_file(a.get(), "config.json", text.data(), size - 1, &size, nullptr, 0), IRIS_ERR_BUFFER_TOO_SMALL);
    ASSERT_EQ(iris_archive_read_file(a.get(), "config.json", text.data(), text.size(), &size, nullptr, 0), IRIS_OK);
    EXPECT_EQ(text, testing_files::read_all(kFix + fixture + "/config.json"));
  }
}

TEST(CApi, WrongArgumentsAreStatusesNotCrashes) {
  iris_status st;
  std::string msg;
  auto a = open_archive(converted("llama-nf4-dq"), &st, &msg);
  ASSERT_EQ(st, IRIS_OK) << msg;
  char buf[256];
  iris_tensor_info info;
  iris_component_info ci;
  uint64_t idx;
  EXPECT_EQ(iris_archive_open(nullptr, 0, nullptr, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  iris_archive* none = reinterpret_cast<iris_archive*>(1);
  EXPECT_EQ(iris_archive_open("/nonexistent/x.iris", 0, &none, buf, sizeof buf), IRIS_ERR_IO);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(buf).find("/nonexistent/x.iris"), std::string::npos) << buf;
  EXPECT_EQ(iris_archive_open(converted("llama-nf4-dq").c_str(), 0x80, &none, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_archive_tensor_info(nullptr, 0, &info, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_archive_tensor_info(a.get(), 1u << 30, &info, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_archive_component(a.get(), 0, 99, &ci, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_archive_find_tensor(a.get(), "no.such.tensor", &idx, buf, sizeof buf), IRIS_ERR_NOT_FOUND);
  EXPECT_NE(std::string(buf).find("no.such.tensor"), std::string::npos);
  EXPECT_EQ(iris_archive_read_file(a.get(), "missing.json", nullptr, 0, nullptr, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  size_t size;
  EXPECT_EQ(iris_archive_read_file(a.get(), "missing.json", nullptr, 0, &size, buf, sizeof buf), IRIS_ERR_NOT_FOUND);
  ASSERT_EQ(iris_archive_find_tensor(a.get(), "model.layers.0.self_attn.q_proj.weight", &idx, nullptr, 0), IRIS_OK);
  EXPECT_EQ(iris_archive_find_component(a.get(), idx, IRIS_ROLE_DATA, &ci, buf, sizeof buf), IRIS_ERR_NOT_FOUND);
  ASSERT_EQ(iris_archive_tensor_info(a.get(), idx, &info, nullptr, 0), IRIS_OK);
  std::vector<float> out(info.numel);
  EXPECT_EQ(iris_dequantize(a.get(), idx, IRIS_DTYPE_F32, out.data(), out.size() * 4 - 1, 0, buf, sizeof buf), IRIS_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(iris_dequantize(a.get(), idx, IRIS_DTYPE_I32, out.data(), out.size() * 4, 0, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_dequantize_rows(a.get(), idx, 2, 1, IRIS_DTYPE_F32, out.data(), out.size() * 4, 0, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(iris_dequantize_rows(a.get(), idx, 0, info.rows + 1, IRIS_DTYPE_F32, out.data(), out.size() * 8, 0, buf, sizeof buf), IRIS_ERR_INVALID_ARGUMENT);
  // Messages are truncated to the caller's buffer, NUL-terminated; NULL buffers are fine.
  char tiny[8];
  EXPECT_EQ(iris_archive_find_tensor(a.get(), "no.such.tensor", &idx, tiny, sizeof tiny), IRIS_ERR_NOT_FOUND);
  EXPECT_EQ(std::strlen(tiny), sizeof tiny - 1);
  EXPECT_EQ(iris_archive_find_tensor(a.get(), "no.such.tensor", &idx, nullptr, 0), IRIS_ERR_NOT_FOUND);
  iris_archive_close(nullptr);
}

TEST(CApi, CppWrapperThrowsWithTheStatus) {
  try {
    iris::Archive a("/nonexistent.iris");
    FAIL() << "opened a missing file";
  } catch (const iris::Error& e) {
    EXPECT_EQ(e.status(), IRIS_ERR_IO);
    EXPECT_NE(std::string(e.what()).find("/nonexistent.iris"), std::string::npos);
  }
  iris::Archive a(converted("gptoss-mxfp4"), IRIS_OPEN_VERIFY);
  EXPECT_EQ(a.model_type(), "gpt_oss");
  const int64_t i = a.find("model.layers.0.mlp.experts.gate_up_proj");
  ASSERT_GE(i, 0);
  EXPECT_EQ(a.info(uint64_t(i)).format, IRIS_FORMAT_MXFP4);
  EXPECT_EQ(a.find("nope"), -1);
  EXPECT_EQ(a.dequantize_f32(uint64_t(i)).size(), a.info(uint64_t(i)).numel);
  EXPECT_FALSE(a.file("config.json").empty());
}

}  // namespace
}  // namespace iris::capi_test

namespace iris::capi_test {
namespace {

// An archive set (`iris convert --max-file-size`) opens through the C API as the whole archive:
// the same tensors in order, each component's bytes those of the single-file archive, in the
// member file the component names (read back from that file with stdio, an independent path),
// the embedded files from the index; dequantization equal bit for bit.
TEST(CApi, AnArchiveSetReadsAsTheWholeArchive) {
  for (const char* fixture : {"llama-bf16", "gptoss-mxfp4"}) {
    SCOPED_TRACE(fixture);
    const std::string& whole_path = converted(fixture, "--quant nf4");
    const std::string& set_path = converted(fixture, "--quant nf4 --max-file-size 1MB");
    iris_status st;
    std::string msg;
    auto whole = open_archive(whole_path, &st, &msg);
    ASSERT_EQ(st, IRIS_OK) << msg;
    auto set = open_archive(set_path, &st, &msg, IRIS_OPEN_VERIFY);
    ASSERT_EQ(st, IRIS_OK) << msg;
    const uint32_t files = iris_archive_data_file_count(set.get());
    ASSERT_GE(files, 3u);
    EXPECT_EQ(iris_archive_data_file_count(whole.get()), 1u);
    EXPECT_STREQ(iris_archive_data_file_path(set.get(), 0), set_path.c_str());
    EXPECT_EQ(iris_archive_data_file_path(set.get(), files), nullptr);
    ASSERT_EQ(iris_archive_tensor_count(set.get()), iris_archive_tensor_count(whole.get()));
    ASSERT_EQ(iris_archive_file_count(set.get()), iris_archive_file_count(whole.get()));
    for (uint64_t i = 0; i < iris_archive_tensor_count(whole.get()); ++i) {
      iris_tensor_info a, b;
      ASSERT_EQ(iris_archive_tensor_info(whole.get(), i, &a, nullptr, 0), IRIS_OK);
      ASSERT_EQ(iris_archive_tensor_info(set.get(), i, &b, nullptr, 0), IRIS_OK);
      ASSERT_STREQ(a.name, b.name);
      ASSERT_EQ(a.n_components, b.n_components);
      for (uint32_t c = 0; c < a.n_components; ++c) {
        iris_component_info x, y;
        ASSERT_EQ(iris_archive_component(whole.get(), i, c, &x, nullptr, 0), IRIS_OK);
        ASSERT_EQ(iris_archive_component(set.get(), i, c, &y, nullptr, 0), IRIS_OK);
        EXPECT_EQ(x.file, 0u);
        ASSERT_GE(y.file, 1u);
        ASSERT_LT(y.file, files);
        ASSERT_EQ(x.size, y.size);
        EXPECT_EQ(x.xxh3, y.xxh3);
        EXPECT_EQ(std::memcmp(x.data, y.data, x.size), 0) << a.name;
        // The bytes at file_offset of the named file are the component's.
        std::string bytes(y.size, '\0');
        FILE* f = std::fopen(iris_archive_data_file_path(set.get(), y.file), "rb");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(std::fseek(f, long(y.file_offset), SEEK_SET), 0);
        ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
        std::fclose(f);
        EXPECT_EQ(XXH3_64bits(bytes.data(), bytes.size()), y.xxh3) << a.name;
      }
      if (a.format != IRIS_FORMAT_RAW) {
        std::vector<float> p(a.numel), q(a.numel);
        ASSERT_EQ(iris_dequantize(whole.get(), i, IRIS_DTYPE_F32, p.data(), p.size() * 4, 1, nullptr, 0), IRIS_OK);
        ASSERT_EQ(iris_dequantize(set.get(), i, IRIS_DTYPE_F32, q.data(), q.size() * 4, 1, nullptr, 0), IRIS_OK);
        EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * 4), 0) << a.name;
      }
    }
    size_t n = 0;
    ASSERT_EQ(iris_archive_read_file(set.get(), "config.json", nullptr, 0, &n, nullptr, 0), IRIS_OK);
    EXPECT_GT(n, 0u);
    char buf[512];
    EXPECT_EQ(iris_archive_verify(set.get(), 0, buf, sizeof buf), IRIS_OK) << buf;
    // The C++ wrapper names the same files.
    iris::Archive wrapped(set_path);
    ASSERT_EQ(wrapped.data_file_count(), files);
    for (uint32_t f = 0; f < files; ++f) EXPECT_EQ(wrapped.data_file_path(f), iris_archive_data_file_path(set.get(), f));
    EXPECT_TRUE(wrapped.data_file_path(files).empty());
  }
}

// A member missing: the open fails with one line naming it.
TEST(CApi, AnIncompleteArchiveSetDoesNotOpen) {
  testing_files::TempDir d;
  ASSERT_EQ(testing_cli::run("convert " + kFix + "llama-bf16 -o " + (d / "s.iris") + " -q --max-file-size 400KB").rc, 0);
  const std::string second = d / "s-00002-of-00010.iris";
  ASSERT_TRUE(std::filesystem::exists(second));
  std::filesystem::remove(second);
  iris_status st;
  std::string msg;
  auto a = open_archive(d / "s.iris", &st, &msg);
  EXPECT_EQ(a, nullptr);
  EXPECT_NE(st, IRIS_OK);
  EXPECT_NE(msg.find("s-00002-of-00010.iris"), std::string::npos) << msg;
}

}  // namespace
}  // namespace iris::capi_test
