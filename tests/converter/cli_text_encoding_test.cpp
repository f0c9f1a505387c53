// Messages and reports that quote bytes which are not UTF-8 (a tensor name with 0xFF in a
// safetensors header, a path that is not UTF-8) still give valid JSON and XML documents, the
// bytes written as \xHH, and the documented exit code: once they aborted (SIGABRT) with an
// empty standard output.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"

namespace iris {
namespace {

using namespace testing_files;
using testing_cli::run;
using testing_cli::run_stdout;

const std::string kBadName = R"({"w)" "\xFF" R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(CliTextEncoding, JsonErrorsQuoteInvalidBytesAsEscapes) {
  TempDir d;
  write_st(d / "bad.safetensors", kBadName, std::string(8, '\0'));
  for (const std::string& args : {"inspect " + (d / "bad.safetensors") + " --json",
                                  "convert " + (d / "bad.safetensors") + " -o " + (d / "a.iris") + " --json"}) {
    auto r = run_stdout(args);
    EXPECT_EQ(r.rc, 3) << args << ": " << r.out;  // invalid input, as README documents
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << args << ": stdout is not JSON: " << r.out;
    EXPECT_EQ(j["ok"], false);
    EXPECT_EQ(j["error"]["exit_code"], 3);
    EXPECT_NE(j["error"]["message"].get<std::string>().find("\\xFF"), std::string::npos) << j.dump();
  }
  EXPECT_FALSE(std::filesystem::exists(d / "a.iris"));
}

// A path that is not UTF-8 in verify's JSON report and its JUnit XML.
TEST(CliTextEncoding, ReportsOfAPathThatIsNotUtf8AreValid) {
  TempDir d;
  const std::string dir = d / "dir\xFE";
  write_bytes(dir + "/x.iris", "not an archive at all, just some bytes");
  auto r = run_stdout("verify " + dir + "/x.iris --json --junit " + (d / "j.xml"));
  EXPECT_EQ(r.rc, 3) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(j.dump().find("dir\\\\xFE"), std::string::npos) << j.dump();  // the escape, itself escaped by JSON
  const std::string xml = read_all(d / "j.xml");
  ASSERT_FALSE(xml.empty());
  EXPECT_EQ(xml.find('\xFE'), std::string::npos) << "a byte that is not UTF-8 in the XML";
  EXPECT_NE(xml.find("dir\\xFE"), std::string::npos) << xml;
}

// Control characters are not allowed in XML 1.0 even as references: written as \xHH too.
TEST(CliTextEncoding, JunitEscapesControlCharacters) {
  TempDir d;
  const std::string dir = d / "tab\x01";
  write_bytes(dir + "/x.iris", "not an archive either");
  run("verify " + dir + "/x.iris --junit " + (d / "j.xml"));
  const std::string xml = read_all(d / "j.xml");
  ASSERT_FALSE(xml.empty());
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  EXPECT_NE(xml.find("tab\\x01"), std::string::npos) << xml;
}

}  // namespace
}  // namespace iris
