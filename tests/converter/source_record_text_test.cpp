// SourceTensor::append_source_text (converter/sources/source_tensors.h): a source record's manifest
// text written without its JSON, which a dry run sizes 10^6 of, is the JSON's text for every
// kind of grouped tensor the fixtures hold.
#include <gtest/gtest.h>

#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "formats/manifest_entry_text.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

TEST(SourceRecordText, IsTheTextOfTheRecordsJson) {
  for (const char* fixture : {"llama-bf16", "llama-fp8-block", "llama-nf4-dq", "gptoss-mxfp4"}) {
    SCOPED_TRACE(fixture);
    auto snap = Snapshot::open(test_paths::fixtures() + fixture);
    ASSERT_TRUE(snap.is_ok()) << snap.status().message();
    auto sources = group_source_tensors(*snap);
    ASSERT_TRUE(sources.is_ok()) << sources.status().message();
    size_t parts = 0;
    for (const auto& st : *sources) {
      parts = std::max(parts, st.parts.size());
      for (int depth : {0, 3}) {
        std::string want, got = "x";
        append_json_text(want, st.source_json(), depth);
        st.append_source_text(got, depth);
        EXPECT_EQ(got, "x" + want) << st.desc.name;
      }
    }
    EXPECT_GT(parts, 0u);
  }
  SourceTensor none;
  std::string got, want;
  none.append_source_text(got, 2);
  append_json_text(want, none.source_json(), 2);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace iris
