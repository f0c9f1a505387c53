// The writer's plan (formats/archive_plan.h, formats/manifest_entry_text.h): each tensor's
// manifest entry written directly is nlohmann's dump of it, byte for byte, and planned()
// (tensors kept, or planned as added) gives exactly the sizes write() writes, wherever the
// empty ranges fall. Late descriptors are covered by late_desc_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/iris_archive.h"
#include "formats/iris_preamble.h"
#include "formats/iris_writer.h"
#include "formats/manifest_entry_text.h"
#include "tests/formats/u8_desc.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using nlohmann::json;

// dump(1)'s text as it reads `depth` levels deep: every line after the first indented more.
std::string nested(const std::string& text, int depth) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(size_t(depth), ' ');
  }
  return out;
}

ArchiveTensor tensor(std::string name, std::vector<uint64_t> shape, Format format, json params, LayoutKind layout, json source) {
  ArchiveTensor t;
  t.desc.name = std::move(name);
  t.desc.shape = std::move(shape);
  t.desc.dtype = DType::kBF16;
  t.desc.format = format;
  t.desc.params = std::move(params);
  t.desc.layout.kind = layout;
  if (layout == LayoutKind::kTiled) t.desc.layout = {LayoutKind::kTiled, 16, 64};
  t.source = std::move(source);
  auto specs = component_specs(t.desc);
  if (specs.is_ok()) {
    uint64_t at = 123456789;
    for (auto& s : *specs) t.components.push_back({s, at += 4096, 0xfedcba9876543210ull});
  } else {  // a descriptor component_specs refuses still has an entry to write
    t.components.push_back({{Role::kData, DType::kU8, {}, 0}, 0, 0});
  }
  return t;
}

TEST(ManifestEntryText, IsNlohmannsDumpByteForByte) {
  const json mxfp4 = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
  const json odd = {{"f", 0.1}, {"tiny", 1e-300}, {"neg", -3}, {"t", true}, {"n", nullptr}, {"arr", json::array()}, {"obj", json::object()},
                    {"nested", {{1, 2}, {{"k", "v\"q"}}}}, {"big", UINT64_MAX}, {"nan", std::nan("")}, {"\u00e9 key\t", "\x7f"}};
  const json record = {{"requantized_from", "bf16"},
                       {"tensors", {{{"role", "codes"}, {"name", "w"}, {"file", "model.safetensors"}, {"dtype", "U8"}, {"shape", {4, 16}}},
                                    {{"role", "scales"}, {"name", "w_scales"}, {"dtype", "U8"}, {"shape", json::array()}}}}};
  const std::vector<ArchiveTensor> tensors = {
      tensor("layers.0.w", {64, 128}, Format::kMxfp4, mxfp4, LayoutKind::kTiled, record),
      tensor("stack", {3, 40, 64}, Format::kMxfp4, mxfp4, LayoutKind::kTiled, json::object()),
      tensor("flat", {96}, Format::kMxfp4, mxfp4, LayoutKind::kFlat, nullptr),
      tensor("odd params", {64, 64}, Format::kMxfp4, odd, LayoutKind::kTiled, odd),
      tensor("tiled rank 1", {64}, Format::kMxfp4, mxfp4, LayoutKind::kTiled, json::array()),
      tensor("raw", {3, 4}, Format::kRaw, json::object(), LayoutKind::kRowMajor, record),
      tensor("raw params unused", {2}, Format::kRaw, odd, LayoutKind::kRowMajor, json::object()),
      tensor("scalar", {}, Format::kRaw, json::object(), LayoutKind::kRowMajor, json::object()),
      tensor("empty", {0, 5}, Format::kRaw, json::object(), LayoutKind::kRowMajor, json::object()),
      tensor("quote\" back\\slash", {1}, Format::kRaw, json::object(), LayoutKind::kRowMajor, json::object()),
      tensor("w\u00e9ight\tname\x01\x7f", {1}, Format::kRaw, json::object(), LayoutKind::kRowMajor, json::object()),
  };
  for (const auto& t : tensors) {
    const std::string want = archive_tensor_to_json(t).dump(1);
    for (int depth : {0, 2, 5}) {
      std::string got = "prefix";
      append_tensor_entry_text(got, t.desc, t.components, t.source.json(), depth);
      EXPECT_EQ(got, "prefix" + nested(want, depth)) << t.desc.name << " at depth " << depth;
    }
    std::string source;
    append_json_text(source, t.source.json(), 0);
    EXPECT_EQ(source, t.source.json().dump(1));
  }
}

// One archive's tensors (sizes; 0 is an empty tensor) and embedded files (empty ones too).
struct Contents {
  std::vector<uint64_t> tensors;
  std::vector<std::string> files;
};

void add(IrisWriter& w, const Contents& c) {
  w.set_model_type("test");
  w.set_tool({{"name", "iris"}});
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const uint64_t n = c.tensors[i];
    const std::string name = "t" + std::to_string(i);
    std::vector<ComponentProducer> producers = {[n](ByteSink& s) { return n ? s.write(std::vector<uint8_t>(n, 5)) : Status::ok(); }};
    if (i % 2)
      w.add_tensor(flat_u8(name, n), json{{"tensors", {{{"role", "data"}, {"name", name}, {"dtype", "U8"}, {"shape", {n}}}}}}, std::move(producers));
    else if (i % 4 == 0)  // the record made on demand
      w.add_tensor(flat_u8(name, n), SourceRecordMaker{[name] { return json{{"i", name}}; }, nullptr}, std::move(producers));
    else  // and its text too
      w.add_tensor(flat_u8(name, n),
                   SourceRecordMaker{[name] { return json{{"i", name}}; },
                                     [name](std::string& out, int depth) { append_json_text(out, json{{"i", name}}, depth); }},
                   std::move(producers));
  }
  for (size_t i = 0; i < c.files.size(); ++i) w.add_file("f" + std::to_string(i) + ".json", c.files[i]);
}

TEST(ArchivePlan, PlannedIsWhatWriteWritesWhereverTheEmptyRangesFall) {
  std::vector<uint64_t> many;
  for (uint64_t i = 0; i < 300; ++i) many.push_back(i % 7 == 0 ? 0 : (i * 977) % 9000);
  const std::vector<Contents> cases = {
      {{}, {}},
      {{}, {"{}"}},
      {{}, {""}},
      {{10}, {}},
      {{10, 0, 0}, {}},               // empty tensors last: moved from offset 4096 to 0
      {{0, 0}, {}},                   // nothing but empty ranges
      {{5000, 0}, {"", "{\"a\":1}"}}, // an empty file before a non-empty one
      {{5000, 0}, {"{\"a\":1}", ""}}, // an empty file last
      {{4096, 0}, {}},                // the data ends on a page
      {many, {"config"}},
      {many, {}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    TempDir d;
    IrisWriter kept, planning(IrisWriter::Mode::kPlan);
    add(kept, cases[k]);
    add(planning, cases[k]);
    auto a = kept.planned(), b = planning.planned();
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    auto w = kept.write(d / "a.iris", WriteOptions{});
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    for (const WriteSummary* p : {&*a, &*b}) {
      EXPECT_EQ(p->file_bytes, w->file_bytes);
      EXPECT_EQ(p->data_bytes, w->data_bytes);
      EXPECT_EQ(p->manifest_bytes, w->manifest_bytes);
      EXPECT_EQ(p->tensor_bytes, w->tensor_bytes);
    }
    EXPECT_EQ(std::filesystem::file_size(d / "a.iris"), w->file_bytes);
    auto archive = IrisArchive::open(d / "a.iris");
    ASSERT_TRUE(archive.is_ok()) << archive.status().message();
    EXPECT_EQ(archive->preamble().manifest_size, w->manifest_bytes);
  }
}

// The data section starts on the page after the planned manifest, so a planned length a few
// bytes off shows only where the manifest ends near a page: a model_type of every length
// around that point, with empty tensors last (whose offsets are written shorter).
TEST(ArchivePlan, ThePlannedManifestLengthIsExactToTheByte) {
  const Contents c{{10, 0, 0}, {}};
  IrisWriter probe(IrisWriter::Mode::kPlan);
  add(probe, c);
  auto base = probe.planned();
  ASSERT_TRUE(base.is_ok());
  const uint64_t edge = kIrisAlignment - kPreambleSize - (base->manifest_bytes - 4);  // "test" is 4 bytes
  for (uint64_t len = edge - 8; len <= edge + 8; ++len) {
    SCOPED_TRACE(len);
    TempDir d;
    IrisWriter kept, planning(IrisWriter::Mode::kPlan);
    add(kept, c);
    add(planning, c);
    kept.set_model_type(std::string(len, 'm'));
    planning.set_model_type(std::string(len, 'm'));
    auto a = kept.planned(), b = planning.planned();
    auto w = kept.write(d / "a.iris", WriteOptions{});
    ASSERT_TRUE(a.is_ok() && b.is_ok() && w.is_ok());
    EXPECT_EQ(a->file_bytes, w->file_bytes);
    EXPECT_EQ(b->file_bytes, w->file_bytes);
    EXPECT_EQ(b->manifest_bytes, w->manifest_bytes);
  }
}

TEST(ArchivePlan, APlanningWriterReportsATensorsErrorFromPlannedAndCannotWrite) {
  TempDir d;
  IrisWriter kept, planning(IrisWriter::Mode::kPlan);
  for (IrisWriter* w : {&kept, &planning}) {
    w->add_tensor(flat_u8("ok", 4), json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(4, 1)); }});
    w->add_tensor(flat_u8("two", 4), json::object(), {[](ByteSink&) { return Status::ok(); }, [](ByteSink&) { return Status::ok(); }});
    w->add_tensor(flat_u8("three", 4), json::object(), {});
  }
  auto a = kept.planned(), b = planning.planned();
  ASSERT_FALSE(a.is_ok());
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(a.status().message(), "tensor 'two': 2 producers for 1 components");
  EXPECT_EQ(b.status().message(), a.status().message());
  auto w = planning.write(d / "a.iris", WriteOptions{});
  ASSERT_FALSE(w.is_ok());
  EXPECT_FALSE(std::filesystem::exists(d / "a.iris"));
}

}  // namespace
}  // namespace iris
