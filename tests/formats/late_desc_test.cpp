// Tensors whose descriptor is final only once their first component is written
// (formats/iris_writer.h, LateDesc: NF4's nested offset): the archive then holds the final
// parameters and sizes, planned() predicts the file exactly, and a final descriptor that would
// move a component or outgrow the manifest's room is refused with no file left.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstdio>
#include <memory>

#include "common/float_bits.h"
#include "formats/iris_archive.h"
#include "formats/iris_writer.h"
#include "formats/tensor_desc.h"
#include "tests/formats/u8_desc.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using nlohmann::json;

// A flat NF4 descriptor of n values whose quant_state takes `state_bytes` bytes.
TensorDesc nf4_desc(uint64_t n, float offset, uint64_t state_bytes) {
  char bits[11];
  std::snprintf(bits, sizeof bits, "0x%08x", f32_bits(offset));
  TensorDesc d;
  d.name = "late.weight";
  d.shape = {n};
  d.dtype = DType::kBF16;
  d.format = Format::kNf4;
  d.layout.kind = LayoutKind::kFlat;
  d.params = {{"block_size", 64},        {"double_quant", true},           {"nested_block_size", 256},
              {"nested_offset", double(offset)}, {"nested_offset_f32_bits", bits}, {"nibble_order", "high_first"},
              {"quant_state_bytes", state_bytes}};
  return d;
}

// What the late tensor learns while its first component is written.
struct Learned {
  bool known = false;
  float offset = 0;
  uint64_t state_bytes = 0;
};

struct Plan {
  uint64_t planned_state = 16, final_state = 200, room = 64;
  float final_offset = 0.0123456789f;
  bool copy_after = true, file_after = true, empty_after = false;
};

// Writes (or, with path empty, plans) an archive of one late NF4 tensor, then a plain one
// and an embedded file unless the plan leaves them out, then an empty tensor if it asks.
Result<WriteSummary> run(const Plan& p, const std::string& path, IrisWriter::Mode mode = IrisWriter::Mode::kWrite) {
  constexpr uint64_t n = 1000;
  auto learned = std::make_shared<Learned>();
  auto learn = [learned, p] {  // the "pass over the values"
    learned->known = true;
    learned->offset = p.final_offset;
    learned->state_bytes = p.final_state;
  };
  const TensorDesc planned = nf4_desc(n, 0.0f, p.planned_state);
  IRIS_ASSIGN_OR_RETURN(auto specs, component_specs(planned));
  std::vector<ComponentProducer> producers;
  for (size_t c = 0; c < specs.size(); ++c)
    producers.push_back([c, learned, learn, bytes = specs[c].bytes](ByteSink& s) -> Status {
      if (c == 0) learn();
      const uint64_t size = c + 1 == 6 ? learned->state_bytes : bytes;  // the quant_state, last, takes its final size
      return s.write(std::vector<uint8_t>(size, uint8_t(0x40 + c)));
    });
  LateDesc late;
  late.manifest_room = p.room;
  late.finish = [learned, learn](TensorDesc& d, json& source) -> Status {
    if (!learned->known) learn();  // a dry run: the work happens here
    d = nf4_desc(n, learned->offset, learned->state_bytes);
    source["state"] = learned->state_bytes;
    return Status::ok();
  };
  IrisWriter w(mode);
  w.set_model_type("test");
  w.add_tensor(planned, json::object(), std::move(producers), ProducerCost::kCompute, late);
  if (p.copy_after)
    w.add_tensor(flat_u8("after", 5000), json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(5000, 7)); }},
                 ProducerCost::kCopy);
  if (p.empty_after) w.add_tensor(flat_u8("empty", 0), json::object(), {[](ByteSink&) { return Status::ok(); }});
  if (p.file_after) w.add_file("config.json", R"({"model_type":"test"})");
  if (path.empty()) return w.planned();
  return w.write(path, WriteOptions{});
}

TEST(LateDesc, TheArchiveHoldsTheFinalDescriptorAndPlannedPredictsItExactly) {
  // The late tensor's quant_state the data section's last range or not, or followed by an empty tensor.
  for (int last : {0, 1, 2}) {
    for (uint64_t final_state : {uint64_t(200), uint64_t(3)}) {  // grown and shrunk within its page
      SCOPED_TRACE(std::to_string(last) + " " + std::to_string(final_state));
      TempDir d;
      Plan p;
      p.final_state = final_state;
      p.copy_after = p.file_after = last == 0;
      p.empty_after = last == 2;
      auto written = run(p, d / "a.iris");
      ASSERT_TRUE(written.is_ok()) << written.status().message();
      for (auto mode : {IrisWriter::Mode::kWrite, IrisWriter::Mode::kPlan}) {  // the tensors kept, or planned as added
        auto predicted = run(p, "", mode);
        ASSERT_TRUE(predicted.is_ok()) << predicted.status().message();
        EXPECT_EQ(predicted->file_bytes, written->file_bytes);
        EXPECT_EQ(predicted->data_bytes, written->data_bytes);
        EXPECT_EQ(predicted->manifest_bytes, written->manifest_bytes);
        EXPECT_EQ(predicted->tensor_bytes, written->tensor_bytes);
      }
      EXPECT_EQ(std::filesystem::file_size(d / "a.iris"), written->file_bytes);
      auto a = IrisArchive::open(d / "a.iris");
      ASSERT_TRUE(a.is_ok()) << a.status().message();
      const ArchiveTensor* t = a->find("late.weight");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->desc.params["nested_offset"].get<double>(), double(p.final_offset));
      EXPECT_EQ(t->source.json()["state"], final_state);
      const auto* state = t->component(Role::kQuantState);
      ASSERT_NE(state, nullptr);
      ASSERT_EQ(state->spec.bytes, final_state);
      const auto bytes = a->bytes(*state);
      EXPECT_EQ(std::count(bytes.begin(), bytes.end(), uint8_t(0x45)), int64_t(final_state));
      for (const auto& tt : a->manifest().tensors) EXPECT_TRUE(a->verify_tensor(tt).is_ok()) << tt.desc.name;
      if (p.file_after) {
        EXPECT_TRUE(a->read_file("config.json").is_ok());
      }
      // The room left between the manifest and the data section is zero, as FORMAT.md requires.
      const auto& pre = a->preamble();
      const auto head = a->mapping().bytes(pre.manifest_offset + pre.manifest_size, pre.data_offset - pre.manifest_offset - pre.manifest_size);
      EXPECT_EQ(std::count(head.begin(), head.end(), uint8_t(0)), int64_t(head.size()));
    }
  }
}

TEST(LateDesc, AFinalDescriptorThatMovesAComponentOrOutgrowsTheRoomIsRefused) {
  TempDir d;
  Plan moves;
  moves.final_state = 5000;  // past the page its planned 16 bytes took
  auto r = run(moves, d / "a.iris");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("moves component 5"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(d / "a.iris"));
  Plan no_room;
  no_room.room = 0;  // the final offset prints longer than the planned 0.0
  r = run(no_room, d / "b.iris");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("outgrew"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(d / "b.iris"));
  EXPECT_TRUE(std::filesystem::is_empty(d.path));  // no partial file either
}

}  // namespace
}  // namespace iris
