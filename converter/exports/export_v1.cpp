#include "converter/exports/export_v1.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/atomic_output.h"
#include "common/checked_math.h"
#include "common/float_bits.h"
#include "converter/sources/safetensors_writer.h"
#include "converter/pipeline/output_guard.h"
#include "converter/sources/seed_names.h"
#include "formats/iris_archive.h"
#include "formats/iris_v1.h"

namespace iris {

namespace {

// Passes bytes on to the file, converting element by element where the seed converts: BF16,
// F16 -> F32 (exact), F32 / F16 -> BF16 (round to nearest even, as torch's .to(bfloat16)).
class ConvertingSink : public ByteSink {
 public:
  ConvertingSink(AtomicOutputFile& out, DType from, V1DType to) : out_(out), from_(from), to_(to) {}
  Status write(std::span<const uint8_t> b) override {
    if (!converts()) return out_.append(b);
    const uint64_t in = dtype_bits(from_) / 8;
    pending_.insert(pending_.end(), b.begin(), b.end());
    const uint64_t n = pending_.size() / in;
    buf_.resize(n * v1_dtype_bytes(to_));
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h = 0;
      float f = 0;
      if (in == 2) {
        std::memcpy(&h, &pending_[2 * i], 2);
        f = from_ == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      } else {
        std::memcpy(&f, &pending_[4 * i], 4);
      }
      if (to_ == V1DType::kF32) std::memcpy(&buf_[4 * i], &f, 4);
      else {
        const uint16_t o = f32_to_bf16(f);
        std::memcpy(&buf_[2 * i], &o, 2);
      }
    }
    pending_.erase(pending_.begin(), pending_.begin() + long(n * in));
    return out_.append(buf_);
  }
  bool converts() const { return !((from_ == DType::kBF16 && to_ == V1DType::kBF16) || (from_ == DType::kF32 && to_ == V1DType::kF32) ||
                                   (from_ == DType::kU8 && to_ == V1DType::kU8)); }

 private:
  AtomicOutputFile& out_;
  DType from_;
  V1DType to_;
  std::vector<uint8_t> pending_, buf_;
};

bool seed_converts(DType from, V1DType to) {
  if (to == V1DType::kU8) return from == DType::kU8;
  return from == DType::kBF16 || from == DType::kF16 || from == DType::kF32;
}

}  // namespace

Result<ExportReport> run_export_v1(const ExportOptions& o) {
  if (o.dtype != "keep") return usage_error("--dtype applies to safetensors exports; --format iris-v1 writes the seed's own dtypes");
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(o.archive));
  const std::string ctx = o.archive + ": ";
  for (const auto& t : a.manifest().tensors) {
    const bool expert = t.desc.name.find(".mlp.experts.") != std::string::npos;
    if (is_quantized(t.desc.format) && !(t.desc.format == Format::kMxfp4 && expert))
      return unsupported(ctx + "tensor '" + t.desc.name + "' is " + format_name(t.desc.format) +
                         ", which .iris v1 cannot express (the seed engine reads BF16 weights and MXFP4 experts only)");
    if (expert && t.desc.format != Format::kMxfp4 && t.desc.name.find("_bias") == std::string::npos)
      return unsupported(ctx + "tensor '" + t.desc.name + "' is not MXFP4: the seed engine reads its experts as MXFP4 blocks (convert with --quant mxfp4)");
  }
  IRIS_ASSIGN_OR_RETURN(std::vector<SafetensorsEntry> entries, export_entries(a, std::nullopt));
  struct Planned {
    SeedSlot slot;
    SafetensorsEntry* entry;
  };
  std::vector<Planned> plan;
  for (auto& e : entries) {
    auto slot = seed_slot(e.name);
    if (!slot) return unsupported(ctx + "tensor '" + e.name + "' has no place among the seed engine's gpt-oss names (.iris v1)");
    if (e.shape.size() > kV1MaxDims) return unsupported(ctx + "tensor '" + e.name + "' has " + std::to_string(e.shape.size()) + " dims; .iris v1 holds at most 8");
    if (!seed_converts(e.dtype, slot->dtype))
      return unsupported(ctx + "tensor '" + e.name + "' is " + std::string(dtype_archive_name(e.dtype)) + "; .iris v1 stores it as " +
                         v1_dtype_name(slot->dtype));
    plan.push_back({*slot, &e});
  }
  std::stable_sort(plan.begin(), plan.end(), [](const Planned& x, const Planned& y) {
    return std::tie(x.slot.layer, x.slot.rank) < std::tie(y.slot.layer, y.slot.rank);
  });
  // The table, then each blob at the next multiple of 256.
  std::vector<uint8_t> header(round_up(kV1HeaderBytes + plan.size() * kV1EntryBytes, kV1HeaderAlign), 0);
  std::memcpy(header.data(), kIrisV1Magic.data(), 8);
  const uint32_t version = 1, count = uint32_t(plan.size());
  std::memcpy(&header[8], &version, 4);
  std::memcpy(&header[12], &count, 4);
  uint64_t pos = header.size(), total = 0;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& [slot, e] = plan[i];
    uint64_t numel = 1;
    for (auto d : e->shape) numel *= d;
    const uint64_t nbytes = numel * v1_dtype_bytes(slot.dtype);
    pos = round_up(pos, kV1BlobAlign);
    offsets.push_back(pos);
    uint8_t* p = &header[kV1HeaderBytes + i * kV1EntryBytes];
    std::memcpy(p, slot.name.data(), slot.name.size());  // seed names are short: never truncated
    std::memcpy(p + 128, &pos, 8);
    std::memcpy(p + 136, &nbytes, 8);
    const uint32_t dtype = uint32_t(slot.dtype), ndim = uint32_t(e->shape.size());
    std::memcpy(p + 144, &dtype, 4);
    std::memcpy(p + 148, &ndim, 4);
    std::memcpy(p + 152, e->shape.data(), 8 * e->shape.size());
    pos += nbytes;
    total += nbytes;
  }
  IRIS_TRY(refuse_input_as_output(o.output, {o.archive}, "output"));
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile out, AtomicOutputFile::create(o.output, o.overwrite, o.partial_files));
  IRIS_TRY(out.append(header));
  uint64_t done = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    IRIS_TRY(out.pad_to(offsets[i]));
    ConvertingSink sink(out, plan[i].entry->dtype, plan[i].slot.dtype);
    IRIS_TRY(plan[i].entry->producer(sink).with_context(ctx + "tensor '" + plan[i].entry->name + "': "));
    done = out.position() - header.size();
    if (o.progress) o.progress(done, total);
  }
  IRIS_TRY(out.commit());
  ExportReport r;
  r.tensors = plan.size();
  r.bytes = pos;
  return r;
}

}  // namespace iris
