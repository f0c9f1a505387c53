// Requantizing in chunks: the bytes do not depend on where the chunks fall (the smallest
// chunks against the default, for every source kind and target, and shapes whose NF4 groups
// of 256 blocks straddle chunks and stacked matrices); NF4 in one streaming pass equals the
// whole-tensor encoder; and a quantized source decoded a few rows at a time gives the values
// the reference tools (bitsandbytes, torch, transformers) produced for the whole tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/float_bits.h"
#include "converter/sources/safetensors_file.h"
#include "converter/sources/safetensors_writer.h"
#include "converter/sources/snapshot.h"
#include "converter/sources/source_tensors.h"
#include "converter/pipeline/requantize.h"
#include "converter/sources/source_decoder.h"
#include "formats/tensor_decode.h"
#include "quant/nf4.h"
#include "tests/test_files.h"
#include "tests/test_paths.h"
#include "tests/vector_sink.h"

namespace iris {
namespace {

using namespace testing_files;
namespace fs = std::filesystem;
const std::string kFix = test_paths::fixtures();

using testing_sinks::VectorSink;

// Every component of `source` requantized to `target`, in chunks of about `chunk_floats`.
std::vector<std::vector<uint8_t>> requantize(const SourceTensor& source, Target target, uint64_t chunk_floats, TensorDesc* desc = nullptr,
                                             QualityStats* quality = nullptr, int workers = 0) {
  RequantOptions o;
  o.chunk_floats = chunk_floats;
  o.workers = workers;
  auto plan = plan_requantize(source, target, o);
  EXPECT_TRUE(plan.is_ok()) << source.desc.name << ": " << plan.status().message();
  if (!plan.is_ok()) return {};
  std::vector<std::vector<uint8_t>> out;
  for (auto& produce : plan->producers) {
    VectorSink s;
    const Status st = produce(s);
    EXPECT_TRUE(st.is_ok()) << source.desc.name << ": " << st.message();
    out.push_back(std::move(s.bytes));
  }
  if (desc) {
    *desc = plan->desc;
    nlohmann::json source_record = plan->source_record;
    if (plan->late.finish) {
      EXPECT_TRUE(plan->late.finish(*desc, source_record).is_ok());  // NF4's final parameters
    }
  }
  if (quality) *quality = *plan->quality;
  return out;
}

bool is_matrix(const SourceTensor& s) { return s.desc.shape.size() >= 2 && s.desc.name.find("norm") == std::string::npos; }

// A BF16 snapshot of the given shapes, values from a sine with sparse outliers.
void write_bf16(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  std::vector<SafetensorsEntry> e;
  for (size_t t = 0; t < tensors.size(); ++t) {
    uint64_t n = 1;
    for (auto x : tensors[t].second) n *= x;
    e.push_back({tensors[t].first, DType::kBF16, tensors[t].second, [n, t](ByteSink& s) -> Status {
                   std::vector<uint16_t> v(n);
                   for (uint64_t i = 0; i < n; ++i) v[i] = f32_to_bf16(std::sin(float(i * 13 + t)) * (i % 997 == 0 ? 1.0f : 0.05f));
                   return s.write({reinterpret_cast<const uint8_t*>(v.data()), n * 2});
                 }});
  }
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(write_safetensors(path, std::move(e), SafetensorsWriteOptions{}).is_ok());
}

TEST(RequantizeStreaming, ChunkEdgesDoNotChangeABytForEverySourceKindAndTarget) {
  for (const std::string fixture : {"llama-bf16", "gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"}) {
    auto snap = Snapshot::open(kFix + fixture);
    ASSERT_TRUE(snap.is_ok()) << snap.status().message();
    auto sources = group_source_tensors(*snap);
    ASSERT_TRUE(sources.is_ok()) << sources.status().message();
    int compared = 0;
    for (const auto& s : *sources) {
      if (!is_matrix(s)) continue;
      for (Target t : {Target::kMxfp4, Target::kNf4, Target::kFp8Tensor, Target::kFp8Channel, Target::kFp8Block, Target::kBf16}) {
        SCOPED_TRACE(fixture + " " + s.desc.name + " -> " + target_name(t));
        const auto whole = requantize(s, t, 16ull << 20);
        const auto chunked = requantize(s, t, 1);  // the smallest chunks: 128 rows
        ASSERT_EQ(whole.size(), chunked.size());
        for (size_t c = 0; c < whole.size(); ++c) EXPECT_TRUE(whole[c] == chunked[c]) << "component " << c;
        ++compared;
      }
    }
    EXPECT_GT(compared, 0) << fixture;
  }
}

// NF4 from a snapshot whose groups of 256 blocks (16384 elements) straddle the 128-row chunks
// and, in the stack, the matrices; a flat tensor (K % 64 != 0); and matrices over a worker's
// piece of 64K values, whose groups straddle the pieces of a chunk. Each against the
// whole-tensor encoder, component by component.
TEST(RequantizeStreaming, Nf4InOnePassEqualsTheWholeTensorEncoder) {
  TempDir d;
  write_bf16(d / "s/model.safetensors", {{"stack.weight", {3, 200, 192}}, {"flat.weight", {1000, 100}}, {"tall.weight", {700, 64}},
                                               {"big.weight", {2, 1000, 192}}, {"wide.weight", {300, 2880}}});
  auto snap = Snapshot::open(d / "s");
  ASSERT_TRUE(snap.is_ok()) << snap.status().message();
  auto sources = group_source_tensors(*snap);
  ASSERT_TRUE(sources.is_ok());
  ASSERT_EQ(sources->size(), 5u);
  for (const auto& s : *sources) {
    SCOPED_TRACE(s.desc.name);
    TensorDesc desc;
    QualityStats chunked_quality, whole_quality;
    const auto got = requantize(s, Target::kNf4, 1, &desc, &chunked_quality);
    ASSERT_EQ(got.size(), 6u);  // codes, absmax, nested_absmax, code_table, nested_code_table, quant_state
    requantize(s, Target::kNf4, 16ull << 20, nullptr, &whole_quality);
    // The quality report sees every element once, decoded as stored, however the groups fell
    // (the sums in another order and grouping: equal to the float partial sums' rounding,
    // quant/error_sums.h).
    EXPECT_EQ(chunked_quality.count, whole_quality.count);
    EXPECT_EQ(chunked_quality.max_abs_err, whole_quality.max_abs_err);
    EXPECT_NEAR(chunked_quality.sum_sq_err, whole_quality.sum_sq_err, 1e-5 * whole_quality.sum_sq_err);
    EXPECT_NEAR(chunked_quality.sum_sq_ref, whole_quality.sum_sq_ref, 1e-5 * whole_quality.sum_sq_ref);
    // The oracle: the whole tensor through the encoder at once.
    auto dec = SourceDecoder::create(s);
    ASSERT_TRUE(dec.is_ok());
    std::vector<float> x((*dec)->rows() * (*dec)->k());
    ASSERT_TRUE((*dec)->decode_rows(0, (*dec)->rows(), x.data()).is_ok());
    quant::Nf4DoubleQuant want;
    quant::nf4_encode_dq(x.data(), x.size(), &want);
    EXPECT_EQ(f32_bits(float(desc.params["nested_offset"].get<double>())), f32_bits(want.offset));
    const auto codes = desc.layout.kind == LayoutKind::kTiled ? untile_codes(desc, got[0]) : got[0];
    EXPECT_TRUE(codes == want.codes) << "codes";
    EXPECT_TRUE(got[1] == want.absmax_codes) << "absmax codes";
    ASSERT_EQ(got[2].size(), want.nested_absmax.size() * 4);
    EXPECT_EQ(std::memcmp(got[2].data(), want.nested_absmax.data(), got[2].size()), 0) << "nested absmax";
  }
}

// Chunks computed by several workers at once and written in order: the same archive bytes and
// the same quality sums, bit for bit, whatever the worker count -- 1 (the codecs' own
// parallel loops) against 2, 3 and 7 (more workers than cores) -- for every target, on shapes
// whose NF4 groups straddle chunks, lie wholly inside them, and cross stacked matrices.
TEST(RequantizeStreaming, WorkerCountChangesNoByteAndNoBitOfTheQualitySums) {
  TempDir d;
  write_bf16(d / "s/model.safetensors",
             {{"stack.weight", {3, 200, 192}}, {"flat.weight", {1000, 100}}, {"wide.weight", {640, 512}}, {"odd.weight", {37, 160}}});
  auto snap = Snapshot::open(d / "s");
  ASSERT_TRUE(snap.is_ok()) << snap.status().message();
  auto sources = group_source_tensors(*snap);
  ASSERT_TRUE(sources.is_ok());
  for (const auto& s : *sources)
    for (Target t : {Target::kMxfp4, Target::kNf4, Target::kFp8Tensor, Target::kFp8Channel, Target::kFp8Block, Target::kBf16}) {
      SCOPED_TRACE(s.desc.name + " -> " + target_name(t));
      QualityStats q1;
      const auto one = requantize(s, t, 1, nullptr, &q1, 1);
      ASSERT_FALSE(one.empty());
      for (int workers : {2, 3, 7}) {
        SCOPED_TRACE(std::to_string(workers) + " workers");
        QualityStats qn;
        const auto many = requantize(s, t, 1, nullptr, &qn, workers);
        ASSERT_EQ(one.size(), many.size());
        for (size_t c = 0; c < one.size(); ++c) EXPECT_TRUE(one[c] == many[c]) << "component " << c;
        EXPECT_EQ(qn.count, q1.count);
        EXPECT_EQ(std::memcmp(&qn.sum_sq_ref, &q1.sum_sq_ref, 8), 0);
        EXPECT_EQ(std::memcmp(&qn.sum_sq_err, &q1.sum_sq_err, 8), 0);
        EXPECT_EQ(std::memcmp(&qn.max_abs_err, &q1.max_abs_err, 8), 0);
      }
    }
}

// A quantized source decoded a few rows at a time (slices of its codes and per-block
// components) against what the reference tools dequantized from the whole tensor.
TEST(RequantizeStreaming, QuantizedSourcesDecodedByRowRangesEqualTheReferenceTools) {
  struct Case {
    std::string fixture, ref;
  };
  for (const Case& c : {Case{"llama-nf4-dq", "refs/llama-nf4-dq.dequant.bnb.safetensors"},
                        Case{"llama-fp8-block", "refs/llama-fp8-block.dequant.torch.safetensors"},
                        Case{"gptoss-mxfp4", "refs/gptoss-mxfp4.dequant.transformers.safetensors"}}) {
    auto snap = Snapshot::open(kFix + c.fixture);
    ASSERT_TRUE(snap.is_ok());
    auto sources = group_source_tensors(*snap);
    ASSERT_TRUE(sources.is_ok());
    auto ref = SafetensorsFile::open(kFix + c.ref);
    ASSERT_TRUE(ref.is_ok());
    int checked = 0;
    for (const auto& s : *sources) {
      if (!is_quantized(s.desc.format)) continue;
      // The reference names: bitsandbytes and torch keep the weight's; transformers drops the
      // gpt-oss checkpoint's "_blocks" and holds the stack transposed, [E, K, N].
      std::string name = s.desc.name;
      if (name.ends_with("_blocks")) name.resize(name.size() - 7);
      const SafetensorsTensor* rt = ref->find(name);
      ASSERT_NE(rt, nullptr) << c.fixture << " " << name;
      const auto rbytes = ref->data(*rt);
      auto dec = SourceDecoder::create(s);
      ASSERT_TRUE(dec.is_ok()) << dec.status().message();
      const uint64_t rows = (*dec)->rows(), k = (*dec)->k(), n = s.desc.shape[s.desc.shape.size() - 2];
      const bool transposed = c.fixture == "gptoss-mxfp4";
      // Ranges that start and end inside blocks, groups and matrices.
      for (auto [r0, r1] : std::vector<std::pair<uint64_t, uint64_t>>{{0, 1}, {1, 3}, {5, 130}, {rows / 2 - 1, rows / 2 + 2}, {rows - 2, rows}}) {
        r1 = std::min(r1, rows);
        if (r0 >= r1) continue;
        std::vector<float> got((r1 - r0) * k);
        ASSERT_TRUE((*dec)->decode_rows(r0, r1, got.data()).is_ok());
        for (uint64_t r = r0; r < r1; ++r)
          for (uint64_t col = 0; col < k; ++col) {
            const float v = got[(r - r0) * k + col];
            const uint64_t e = r / n, row = r % n;
            const uint64_t at = transposed ? (e * k + col) * n + row : r * k + col;
            if (rt->dtype == DType::kF32) {
              float want;
              std::memcpy(&want, rbytes.data() + at * 4, 4);
              ASSERT_EQ(f32_bits(v), f32_bits(want)) << name << " row " << r << " col " << col;
            } else {
              uint16_t want;
              std::memcpy(&want, rbytes.data() + at * 2, 2);
              ASSERT_EQ(f32_to_bf16(v), want) << name << " row " << r << " col " << col;
            }
          }
      }
      ++checked;
    }
    EXPECT_GT(checked, 0) << c.fixture;
  }
}

}  // namespace
}  // namespace iris
