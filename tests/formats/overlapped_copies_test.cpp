// The archive writer with large copies on a second stream (formats/iris_writer.h,
// WriteOptions::overlap_copies): the file is byte for byte the one written in file order, the
// copies really run beside the computed tensors, and a failure on either stream is the one
// reported, with no file left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "common/hashing.h"
#include "formats/iris_archive.h"
#include "formats/iris_writer.h"
#include "tests/formats/u8_desc.h"
#include "tests/test_files.h"

namespace iris {
namespace {

using namespace testing_files;
using nlohmann::json;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng());
  return v;
}

struct Item {
  std::string name;
  uint64_t bytes;
  ProducerCost cost;
};

// Which thread ran each tensor's producer.
struct Threads {
  std::mutex mu;
  std::map<std::string, std::thread::id> of;
};

// Writes the items (their bytes random, pushed in uneven pieces) and returns the status.
Result<WriteSummary> write_items(const std::string& path, const std::vector<Item>& items, bool with_file, bool overlap,
                                 Threads* threads, std::map<std::string, std::vector<uint8_t>>* data) {
  IrisWriter w;
  w.set_model_type("test");
  for (const auto& it : items) {
    auto bytes = random_bytes(it.bytes, uint32_t(it.bytes) ^ uint32_t(std::hash<std::string>()(it.name)));
    (*data)[it.name] = bytes;
    w.add_tensor(flat_u8(it.name, it.bytes), json::object(),
                 {[bytes, name = it.name, threads](ByteSink& s) -> Status {
                   {
                     std::lock_guard<std::mutex> lock(threads->mu);
                     threads->of[name] = std::this_thread::get_id();
                   }
                   for (size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 4093)
                     IRIS_TRY(s.write({bytes.data() + at, std::min(piece, bytes.size() - at)}));
                   return Status::ok();
                 }},
                 it.cost);
  }
  if (with_file) w.add_file("config.json", R"({"model_type":"test"})");
  WriteOptions o;
  o.overlap_copies = overlap;
  return w.write(path, o);
}

constexpr uint64_t kBig = kOverlappedCopyMinBytes;

struct Case {
  const char* what;
  std::vector<Item> items;
  bool with_file;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.what; }

class OverlappedCopies : public ::testing::TestWithParam<Case> {};

TEST_P(OverlappedCopies, GiveTheArchiveOfOneStreamByteForByte) {
  const Case& c = GetParam();
  TempDir d;
  Threads overlapped, ordered;
  std::map<std::string, std::vector<uint8_t>> data;
  auto a = write_items(d / "a.iris", c.items, c.with_file, true, &overlapped, &data);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  auto b = write_items(d / "b.iris", c.items, c.with_file, false, &ordered, &data);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_TRUE(read_all(d / "a.iris") == read_all(d / "b.iris")) << c.what << ": the two archives differ";

  // The large copies ran on a thread of their own, the rest on the caller's; with one stream,
  // everything on the caller's.
  const auto caller = std::this_thread::get_id();
  for (const auto& it : c.items) {
    const bool big_copy = it.cost == ProducerCost::kCopy && it.bytes >= kBig;
    if (big_copy) EXPECT_NE(overlapped.of[it.name], caller) << it.name;
    else EXPECT_EQ(overlapped.of[it.name], caller) << it.name;
    EXPECT_EQ(ordered.of[it.name], caller) << it.name;
  }

  auto archive = IrisArchive::open(d / "a.iris");
  ASSERT_TRUE(archive.is_ok()) << archive.status().message();
  ASSERT_EQ(archive->manifest().tensors.size(), c.items.size());
  for (const auto& t : archive->manifest().tensors) {
    auto got = archive->bytes(t.components[0]);
    const auto& want = data[t.desc.name];
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << t.desc.name;
    EXPECT_EQ(t.components[0].xxh3, xxh3_64(want.data(), want.size())) << t.desc.name;
  }
  EXPECT_EQ(std::filesystem::file_size(d / "a.iris"), a->file_bytes);
}

const auto kCopy = ProducerCost::kCopy;
const auto kCompute = ProducerCost::kCompute;

INSTANTIATE_TEST_SUITE_P(
    Orders, OverlappedCopies,
    ::testing::Values(
        // A model's order: large copies first and last, small copies between computed tensors.
        Case{"copies around", {{"embed", kBig + 123, kCopy}, {"q", 70001, kCompute}, {"norm", 4100, kCopy}, {"k", 5, kCompute},
                               {"head", kBig + 4096, kCopy}}, true},
        // The data section ends with the copy stream's tensor (no embedded file after it).
        Case{"copy last", {{"q", 3 << 20, kCompute}, {"norm", 17, kCopy}, {"big", kBig, kCopy}, {"k", 4096, kCompute},
                           {"head", kBig + 1, kCopy}}, false},
        // The data section ends with the copy stream's bytes, an empty computed tensor after it.
        Case{"empty after the last copy", {{"q", 5000, kCompute}, {"big", kBig + 3, kCopy}, {"none", 0, kCompute}}, false},
        // Copies in a row, between computed tensors, and computed tensors of no bytes.
        Case{"copies in a row", {{"none", 0, kCompute}, {"x", 1, kCompute}, {"a", kBig + 7, kCopy}, {"b", kBig + 8191, kCopy},
                                 {"small", 1, kCopy}, {"y", 12345, kCompute}}, true}),
    [](const auto& info) {
      std::string n = info.param.what;
      for (auto& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

// A failure on either stream is the one reported, whatever the other was doing, and nothing
// is left in the folder.
TEST(OverlappedCopies, AFailureOnEitherStreamIsReportedAndLeavesNoFile) {
  for (int failing : {0, 1}) {
    TempDir d;
    IrisWriter w;
    const auto big = random_bytes(kBig * 3, 7);
    auto copy = [&big, failing](ByteSink& s) -> Status {
      for (size_t at = 0; at < big.size(); at += 1 << 20) {
        if (failing == 1 && at == 2 << 20) return io_error("copy source: read failed at " + std::to_string(at));
        IRIS_TRY(s.write({big.data() + at, std::min<size_t>(1 << 20, big.size() - at)}));
      }
      return Status::ok();
    };
    auto compute = [failing](ByteSink& s) -> Status {
      std::vector<uint8_t> b(1 << 20, 1);
      IRIS_TRY(s.write(b));
      if (failing == 0) return invalid_input("tensor 'w': 1 non-finite value(s)");
      return s.write(b);
    };
    w.add_tensor(flat_u8("embed", big.size()), json::object(), {copy}, ProducerCost::kCopy);
    w.add_tensor(flat_u8("w", 2 << 20), json::object(), {compute}, ProducerCost::kCompute);
    auto r = w.write(d / "x.iris", {});
    ASSERT_FALSE(r.is_ok()) << "failing " << failing;
    const std::string want = failing == 0 ? "non-finite" : "read failed at 2097152";
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find("abandoned"), std::string::npos) << r.status().message();
    EXPECT_TRUE(std::filesystem::is_empty(d.path)) << "failing " << failing;
  }
}

// A copy that produces fewer bytes than planned is an error naming its tensor.
TEST(OverlappedCopies, AShortCopyIsAnErrorNamingItsTensor) {
  TempDir d;
  IrisWriter w;
  w.add_tensor(flat_u8("embed", kBig), json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(kBig - 1, 2)); }},
               ProducerCost::kCopy);
  w.add_tensor(flat_u8("w", 100), json::object(), {[](ByteSink& s) { return s.write(std::vector<uint8_t>(100, 3)); }});
  auto r = w.write(d / "x.iris", {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("tensor 'embed'"), std::string::npos) << r.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(d.path));
}

}  // namespace
}  // namespace iris
