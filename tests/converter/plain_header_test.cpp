// The plain safetensors header reader (converter/sources/safetensors_plain_header.h): it takes the
// headers the reference writer produces and gives the full reader's tables for them; anything
// else it declines, so that the full reader (and its message) decides. The full reader's
// messages are pinned by malformed_inputs_test.cpp, through the same entry point.
#include <gtest/gtest.h>

#include "converter/sources/safetensors_file.h"
#include "converter/sources/safetensors_plain_header.h"

namespace iris {
namespace {

struct Read {
  bool taken = false;
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
};

Read plain(std::string_view header) {
  Read r;
  r.taken = parse_plain_safetensors_header(header, &r.tensors, &r.metadata);
  return r;
}

// The header through parse_safetensors_header (the plain reader where it takes it), sorted
// and checked against `data_size`.
Status full(std::string_view header, uint64_t data_size, Read* r) {
  return parse_safetensors_header("h", header, data_size, &r->tensors, &r->metadata);
}

TEST(PlainHeader, TakesWhatTheReferenceWriterWrites) {
  const std::string h =
      R"({"__metadata__":{"format":"pt","note":""},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      "\n \t\r"
      R"("a" : { "shape" : [ 2 , 2 ] , "data_offsets" : [ 0 , 8 ] , "dtype" : "BF16" },"s":{"dtype":"F32","shape":[],"data_offsets":[12,16]}}   )";
  Read r = plain(h);
  ASSERT_TRUE(r.taken);
  ASSERT_EQ(r.tensors.size(), 3u);  // document order; the caller sorts
  EXPECT_EQ(r.tensors[0].name, "b");
  EXPECT_EQ(r.tensors[1].name, "a");
  EXPECT_EQ(r.tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(r.tensors[1].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(r.tensors[1].numel, 4u);
  EXPECT_EQ(r.tensors[1].size, 8u);
  EXPECT_EQ(r.tensors[2].shape, std::vector<uint64_t>{});
  EXPECT_EQ(r.tensors[2].offset, 12u);
  EXPECT_EQ(r.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", ""}}));

  Read f;
  ASSERT_TRUE(full(h, 16, &f).is_ok());
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.metadata, r.metadata);
  EXPECT_TRUE(plain("{}").taken);
  EXPECT_TRUE(plain(R"({"__metadata__":{}})").taken);
  EXPECT_TRUE(plain(R"({"a":{"dtype":"U8","shape":[0,281474976710655],"data_offsets":[0,0]}})").taken);
  EXPECT_TRUE(plain(R"({")" + std::string(4096, 'n') + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})").taken);
}

// Valid JSON that the full reader takes, or refuses with a message of its own: declined.
TEST(PlainHeader, DeclinesEverythingElse) {
  const std::string e = R"({"dtype":"BF16","shape":[2],"data_offsets":[0,4]})";
  const std::vector<std::string> headers = {
           // the full reader takes these
           R"({"a\u0062":)" + e + "}",                                             // an escape
           "{\"\xC3\xA9\":" + e + "}",                                             // UTF-8
           R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4],"x":1}})",     // another key
           R"({"__metadata__":{"a":"\n"},"a":)" + e + "}",                         // an escaped value
           "\xEF\xBB\xBF{}",                                                       // a byte-order mark
           // the full reader refuses these, each with its own message
           R"({"__metadata__":{},"__metadata__":{}})",
           R"({"__metadata__":{"a":"1","a":"2"}})",
           R"({"a":{"dtype":"BF16","dtype":"BF16","shape":[2],"data_offsets":[0,4]}})",
           R"({"__metadata__":{"a":1}})",
           R"({"__metadata__":[]})",
           R"({"":)" + e + "}",
           "{\"a\x01\":" + e + "}",
           "{\"a\xff\":" + e + "}",
           R"({")" + std::string(4097, 'n') + R"(":)" + e + "}",
           R"({"a":{"dtype":"BF17","shape":[2],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"BF16","shape":[-2],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"BF16","shape":[2.0],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"BF16","shape":[2e0],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"BF16","shape":[02],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"U8","shape":[281474976710656],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"U8","shape":[1000000000000000],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})",
           R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})",
           R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,6]}})",
           R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[4,0]}})",
           R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4,5]}})",
           R"({"a":{"dtype":"BF16","shape":[2]}})",
           R"({"a":[1]})",
           R"({"a":null})",
           R"({"a":)" + e,
           R"({"a":)" + e + ",}",
           R"({"a":)" + e + "} x",
           std::string(R"({"a":)") + e + std::string("}\0", 2),
           "{}{}",
           "[1]",
           "",
  };
  for (const std::string& h : headers) EXPECT_FALSE(plain(h).taken) << h;
}

// A header the plain reader declines still reads as before: through the full reader. So does
// one with a name twice, which the plain reader leaves to its caller's index.
TEST(PlainHeader, WhatItDeclinesTheFullReaderReads) {
  Read r;
  ASSERT_TRUE(full(R"({"a\u0062":{"dtype":"BF16","shape":[2],"data_offsets":[0,4],"x":[1,{"y":null}]}})", 4, &r).is_ok());
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].name, "ab");
  const Status dup = full(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"a":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}})", 8, &r);
  EXPECT_EQ(dup.message(), "h: header: duplicate key 'a'");
}

}  // namespace
}  // namespace iris
