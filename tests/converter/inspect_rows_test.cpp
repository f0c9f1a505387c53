// Inspection::row (converter/inspect/inspect.h): a snapshot's table rows are made without its JSON,
// and must say what the JSON says, for every fixture (quantized kinds with their params) and
// for archives (whose rows come from the JSON).
#include <gtest/gtest.h>

#include "converter/pipeline/convert.h"
#include "converter/inspect/inspect.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

void expect_rows_match_json(const std::string& path) {
  auto in = Inspection::open(path);
  ASSERT_TRUE(in.is_ok()) << in.status().message();
  ASSERT_GT(in->tensor_count(), 0u);
  for (size_t i = 0; i < in->tensor_count(); ++i) {
    const Inspection::Row r = in->row(i), j = Inspection::row_of(in->tensor(i));
    EXPECT_EQ(r.name, j.name);
    EXPECT_EQ(r.shape, j.shape) << r.name;
    EXPECT_EQ(r.format, j.format) << r.name;
    EXPECT_EQ(r.dtype, j.dtype) << r.name;
    EXPECT_EQ(r.layout, j.layout) << r.name;
    EXPECT_EQ(r.bytes, j.bytes) << r.name;
    EXPECT_EQ(r.offset, j.offset) << r.name;
    EXPECT_EQ(r.params, j.params) << r.name;
  }
}

TEST(InspectRows, SnapshotRowsSayWhatTheirJsonSays) {
  for (const char* fixture : {"llama-bf16", "llama-fp8-block", "llama-nf4-dq", "gptoss-mxfp4"}) {
    SCOPED_TRACE(fixture);
    expect_rows_match_json(test_paths::fixtures() + fixture);
  }
}

TEST(InspectRows, ArchiveRowsComeFromTheirJson) {
  testing_files::TempDir d;
  ConvertOptions o;
  o.source = test_paths::fixtures() + "gptoss-mxfp4";
  o.output = d / "a.iris";
  ASSERT_TRUE(run_convert(o).is_ok());
  expect_rows_match_json(o.output);
  auto in = Inspection::open(o.output);
  ASSERT_TRUE(in.is_ok());
  bool tiled = false;
  for (size_t i = 0; i < in->tensor_count(); ++i) tiled = tiled || in->row(i).layout.starts_with("tiled ");
  EXPECT_TRUE(tiled);  // the layout column is filled for archives
}

}  // namespace
}  // namespace iris
