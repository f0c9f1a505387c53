// Inputs that are not Hugging Face safetensors, given as convert sources: each gets one line
// naming what the file is and what to do, the "unsupported" exit code (7), and no output.
// (.iris archives are sources: tests/converter/archive_source_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/cli_runner.h"

namespace iris {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size())); }

TEST(ForeignInputs, EachIsNamedWithWhatToDo) {
  const fs::path dir = fs::path(::testing::TempDir()) / "foreign_inputs";
  fs::remove_all(dir);
  fs::create_directories(dir / "pickles");
  write(dir / "model.gguf", std::string("GGUF\x03\x00\x00\x00", 8) + std::string(64, '\0'));
  write(dir / "model.pt", std::string("PK\x03\x04", 4) + std::string(64, 'z'));
  write(dir / "pytorch_model.bin", std::string("\x80\x02}q\x00.", 6));
  write(dir / "pickles" / "pytorch_model.bin", std::string("\x80\x04\x95", 3));
  const struct {
    std::string src, says;
  } cases[] = {{"model.gguf", "a GGUF file"},
               {"model.pt", "a zip archive"},
               {"pytorch_model.bin", "a Python pickle"},
               {"pickles", "'pytorch_model.bin' (a PyTorch pickle"}};
  for (const auto& c : cases) {
    auto r = testing_cli::run("convert -q " + (dir / c.src).string() + " -o " + (dir / "out.iris").string());
    EXPECT_EQ(r.rc, 7) << c.src << ": " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.src << ": " << r.out;
    EXPECT_EQ(r.out.find("header length"), std::string::npos) << c.src << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.src << ": one line: " << r.out;
    EXPECT_FALSE(fs::exists(dir / "out.iris")) << c.src;
  }
}

}  // namespace
}  // namespace iris
