// Requantization's plan for one tensor (converter/pipeline/requantize.h): its descriptor, source record
// and producers; the chunk engine and each target's encoder are in requant/.
#include "converter/pipeline/requantize.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "common/checked_math.h"
#include "converter/pipeline/requant/chunk_engine.h"
#include "quant/nf4.h"
#include "quant/tables.h"

namespace iris {

using nlohmann::json;
using namespace requant;

namespace {

// The producer of the streamed component; the job's decoder is dropped once it has run.
ComponentProducer codes_producer(std::shared_ptr<Job> j, Status (*produce)(Job&, ByteSink&)) {
  return [j, produce](ByteSink& s) {
    Status st = produce(*j, s);
    j->decoder.reset();  // the producers, and so the job, live until the whole archive is written
    return st;
  };
}

// A side component from the stash (`pick` names it), freed once written: the stash holds one
// tensor's side components at most, never the model's.
template <typename Pick>
ComponentProducer stash_bytes(std::shared_ptr<Job> j, Pick pick) {
  return [j, pick](ByteSink& s) {
    auto& v = pick(j->stash);
    const Status st = s.write({reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0])});
    std::remove_reference_t<decltype(v)>().swap(v);
    return st;
  };
}

std::vector<uint8_t> f32_table(float (*f)(uint8_t), int n) {
  std::vector<uint8_t> out(n * 4);
  for (int i = 0; i < n; ++i) {
    float v = f(uint8_t(i));
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

json part(const std::string& role, const std::string& name, const char* dtype, std::vector<uint64_t> shape) {
  return {{"role", role}, {"name", name}, {"dtype", dtype}, {"shape", std::move(shape)}};
}

}  // namespace

int requant_workers(const RequantOptions& o) { return o.workers > 0 ? o.workers : std::max(1, omp_get_max_threads()); }

uint64_t requant_chunk_rows(uint64_t tile_n, uint64_t k, uint64_t chunk_floats) {
  const uint64_t base = std::lcm<uint64_t>(std::max<uint64_t>(tile_n, 1), 128);
  return std::max<uint64_t>(base, chunk_floats / std::max<uint64_t>(k, 1) / base * base);
}

Result<RequantPlan> plan_requantize(const SourceTensor& source, Target target, const RequantOptions& o) {
  auto job = std::make_shared<Job>();
  Job& j = *job;
  j.source = source;
  j.target = target;
  j.opts = o;
  IRIS_ASSIGN_OR_RETURN(j.decoder, SourceDecoder::create(source));
  const auto& shape = source.desc.shape;
  TensorDesc& d = j.desc;
  d.name = source.desc.name;
  d.shape = shape;
  d.dtype = source.desc.dtype == DType::kF16 || source.desc.dtype == DType::kF32 ? source.desc.dtype : DType::kBF16;
  // A source no archive format holds as stored (packed integers) is kept as its dequantized
  // values, in the dtype the producing tool dequantizes to: exactly the tool's weights.
  const bool decode_as_is = target == Target::kKeep && source.packed;
  if (target == Target::kKeep && !decode_as_is) return internal_error("plan_requantize called for keep");
  if (target == Target::kBf16 || decode_as_is) {
    d.dtype = decode_as_is ? source.desc.dtype : DType::kBF16;
    d.format = Format::kRaw;
    j.k = j.decoder->k();
    j.n = j.decoder->rows();
  } else {
    if (shape.size() < 2)
      return usage_error("tensor '" + d.name + "': " + target_name(target) + " needs a matrix, the tensor has shape " + json(shape).dump());
    j.n = shape[shape.size() - 2];
    j.k = shape.back();
    for (size_t i = 0; i + 2 < shape.size(); ++i) j.batch *= shape[i];
    if (j.k == 0 || j.n == 0) return usage_error("tensor '" + d.name + "': cannot quantize an empty matrix");
  }
  const uint64_t numel = j.batch * j.n * j.k;
  json parts = json::array();
  const std::string base = d.name;
  std::vector<uint64_t> prefix(shape.begin(), shape.end() - std::min<size_t>(2, shape.size()));
  RequantPlan plan;
  switch (target) {
    case Target::kMxfp4: {
      d.format = Format::kMxfp4;
      d.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"},
                  {"scale_rule", o.mxfp4_rule == quant::Mxfp4ScaleRule::kSearch ? "search" : "ocp_floor"}};
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      auto blocks_shape = prefix;
      blocks_shape.insert(blocks_shape.end(), {j.n, ceil_div(j.k, 32), 16});
      auto scales_shape = prefix;
      scales_shape.insert(scales_shape.end(), {j.n, ceil_div(j.k, 32)});
      parts.push_back(part("codes", base + "_blocks", "U8", blocks_shape));
      parts.push_back(part("scales", base + "_scales", "U8", scales_shape));
      plan.producers = {codes_producer(job, produce_mxfp4), stash_bytes(job, [](Stash& x) -> auto& { return x.mxfp4_scales; })};
      break;
    }
    case Target::kNvfp4: {
      // ModelOpt's layout and names: P.weight U8 [..., N, K/2] (K padded to 16), P.weight_scale
      // F8_E4M3 [..., N, K/16], P.weight_scale_2 F32, one a matrix ([] for one matrix).
      d.format = Format::kNvfp4;
      d.params = {{"block_size", 16},  {"element", "e2m1"},       {"scale_encoding", "e4m3"},      {"nibble_order", "low_first"},
                  {"tensor_scale", "multiplies"}, {"negative_zero", false}, {"tensor_scale_shape", prefix}, {"scale_rule", "modelopt"}};
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      auto codes_shape = prefix;
      codes_shape.insert(codes_shape.end(), {j.n, ceil_div(j.k, 16) * 8});
      auto scales_shape = prefix;
      scales_shape.insert(scales_shape.end(), {j.n, ceil_div(j.k, 16)});
      const std::string stem = base.size() > 7 && base.ends_with(".weight") ? base : base + ".weight";
      parts.push_back(part("codes", base, "U8", codes_shape));
      parts.push_back(part("scales", stem + "_scale", "F8_E4M3", scales_shape));
      parts.push_back(part("tensor_scale", stem + "_scale_2", "F32", prefix));
      plan.producers = {codes_producer(job, produce_nvfp4), stash_bytes(job, [](Stash& x) -> auto& { return x.nvfp4_scales; }),
                        stash_bytes(job, [](Stash& x) -> auto& { return x.nvfp4_tensor_scales; })};
      break;
    }
    case Target::kFp8Tensor:
    case Target::kFp8Channel:
    case Target::kFp8Block: {
      d.format = Format::kFp8E4M3;
      std::vector<uint64_t> sshape = prefix;
      std::string gran, scale_name = "weight_scale";
      if (target == Target::kFp8Tensor) {
        gran = "tensor";
        sshape.push_back(1);
      } else if (target == Target::kFp8Channel) {
        gran = "channel";
        sshape.insert(sshape.end(), {j.n, 1});
      } else {
        gran = "block";
        scale_name = "weight_scale_inv";
        sshape.insert(sshape.end(), {ceil_div(j.n, 128), ceil_div(j.k, 128)});
      }
      d.params = {{"scale_granularity", gran}, {"scale_dtype", "f32"}, {"scale_shape", sshape}, {"scale_name", scale_name}};
      if (gran == "block") {
        d.params["block_n"] = 128;
        d.params["block_k"] = 128;
      }
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      // HF naming: P.weight + P.weight_scale_inv (blocks) or P.weight_scale (tensor, channel).
      const std::string scale_tensor = base.size() > 7 && base.ends_with(".weight") ? base + (gran == "block" ? "_scale_inv" : "_scale")
                                                                                   : base + "." + scale_name;
      parts.push_back(part("codes", base, "F8_E4M3", shape));
      parts.push_back(part("scales", scale_tensor, "F32", sshape));
      plan.producers = {codes_producer(job, produce_fp8), stash_bytes(job, [](Stash& x) -> auto& { return x.fp8_scales; })};
      break;
    }
    case Target::kNf4: {
      d.format = Format::kNf4;
      d.params = {{"block_size", 64}, {"double_quant", true}};
      d.layout = choose_layout(d, o.tile_n, o.tile_k);
      if (d.layout.kind == LayoutKind::kFlat) {
        // Blocks follow the flattened tensor: chunk it as one matrix so that every chunk
        // starts on a 64-element block, across the boundaries of stacked matrices too.
        j.n *= j.batch;
        j.batch = 1;
      }
      // The nested offset (a manifest parameter) is the mean of every block's absmax: a pass
      // over the values, which the codes producer makes when the tensor's turn comes, beside the
      // writing of the tensors before it (formats/iris_writer.h: LateDesc). Planned with 0.
      set_nf4_params(j, 0.0f);
      const uint64_t nabs = ceil_div(numel, 64);
      parts.push_back(part("codes", base, "U8", {ceil_div(numel, 2), 1}));
      parts.push_back(part("absmax", base + ".absmax", "U8", {nabs}));
      parts.push_back(part("nested_absmax", base + ".nested_absmax", "F32", {ceil_div(nabs, 256)}));
      parts.push_back(part("code_table", base + ".quant_map", "F32", {16}));
      parts.push_back(part("nested_code_table", base + ".nested_quant_map", "F32", {256}));
      parts.push_back(part("quant_state", base + ".quant_state.bitsandbytes__nf4", "U8", {j.stash.quant_state.size()}));
      plan.late.manifest_room = kNf4ManifestRoom;
      plan.late.finish = [job](TensorDesc& desc, json& source) -> Status {
        IRIS_TRY(ensure_nf4_offset(*job));
        desc.params = job->desc.params;
        for (auto& t : source["tensors"])
          if (t["role"] == "quant_state") t["shape"] = {job->stash.quant_state.size()};
        return Status::ok();
      };
      plan.producers = {codes_producer(job, produce_nf4), stash_bytes(job, [](Stash& x) -> auto& { return x.nf4.absmax_codes; }),
                        stash_bytes(job, [](Stash& x) -> auto& { return x.nf4.nested_absmax; }),
                        [](ByteSink& s) { return s.write(f32_table(quant::nf4_to_f32, 16)); },
                        [](ByteSink& s) { return s.write(f32_table(quant::dynamic_map_value, 256)); },
                        [job](ByteSink& s) {
                          const auto& q = job->stash.quant_state;
                          return s.write({reinterpret_cast<const uint8_t*>(q.data()), q.size()});
                        }};
      break;
    }
    case Target::kBf16:
    case Target::kKeep:  // decode_as_is
      parts.push_back(part("data", base, std::string(dtype_st_name(d.dtype)).c_str(), shape));
      plan.producers = {codes_producer(job, produce_float)};
      break;
  }
  // The decoder is made again when the tensor's turn comes: between now and then it would
  // hold buffers for nothing while the other tensors are planned.
  j.decoder.reset();
  plan.desc = d;
  plan.source_record = {{"tensors", parts},
                        {"requantized_from", source.packed                      ? source.packed->describe()
                                             : is_quantized(source.desc.format) ? format_name(source.desc.format)
                                                                                : std::string(dtype_archive_name(source.desc.dtype))}};
  plan.quality = j.quality;
  return plan;
}

}  // namespace iris
