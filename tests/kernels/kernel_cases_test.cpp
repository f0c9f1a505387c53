// Every GPU kernel against the CPU reference on the same inputs, in the spirit of llama.cpp's
// test-backend-ops. A case is (format, shape, tile layout, scale regime); inputs are fresh
// random bytes each run (the seed is printed), outputs are poisoned before each launch.
//   dequant: FP32 and BF16 outputs must equal the CPU reference bit for bit;
//   GEMV:    every output within the FP32-accumulation bound of a double reference
//            (verify/gemv_bound.h), batches 1..16.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <random>

#include "common/checked_math.h"
#include "common/float_bits.h"
#include "formats/tile_layout.h"
#include "kernels/decode_ops.h"
#include "kernels/device_info.h"
#include "kernels/expert_set.h"
#include "kernels/gemv_mma.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4_planes.h"
#include "kernels/tuning.h"
#include "quant/int_group.h"
#include "quant/tables.h"
#include "verify/gemv_bound.h"
#include "tests/kernels/late_writer.h"
#include "tests/kernels/nf4_bnb_weights.h"
#include "formats/tensor_decode.h"

namespace iris {
namespace {

// kSigned: float scales of random sign and magnitude (log-uniform over 1e-4..10), with zeros of
// both signs and subnormals among them; kSignedHuge: random sign, magnitudes 1e25..1e30.
// Decoding is code x scale whatever the sign (transformers' FP8 checkpoints hold negative
// block scales), so every path must give the reference's bits with them (issue 24).
// kRealMxfp4: MXFP4 scales as real weights have them, E8M0 <= 128 (blocks up to 12 in
// magnitude), with one block in 200 larger (129..140). A warp's chunk holds 64 scales, so about
// three chunks in four have no larger one and take the one-factor step (run v60) while the
// others do not, both in one matrix; kNormal's 100..140 leaves almost no chunk without one.
enum class Scales { kNormal, kExtreme, kWithNaN, kSigned, kSignedHuge, kRealMxfp4 };

struct Case {
  // mxfp4 | nf4 | bnb_fp4 | fp8-tensor | fp8-channel | fp8-block | fp8-group | fp8-group128 | fp8-group24 | fp8-bf16 (BF16
  // block scales) | fp8-f16 (F16 block scales) | fp8-block48x192 (blocks of 48 rows and 192 columns: neither a power of two)
  // | int<bits>-g<group>[-zp][-perm][-bf16|-f32][-post] (int_group: group 0 one a row; zero points,
  // an act-order permutation, BF16 or F32 scales (else F16), LLM.int8's 1/127 post factor)
  std::string format;
  std::vector<uint64_t> shape;
  uint64_t tile_n, tile_k;  // 0: the converter's default choice
  Scales scales = Scales::kNormal;
};

std::string name_of(const Case& c) {
  std::string s = c.format + " [";
  for (size_t i = 0; i < c.shape.size(); ++i) s += (i ? "," : "") + std::to_string(c.shape[i]);
  s += "] tile " + std::to_string(c.tile_n) + "x" + std::to_string(c.tile_k);
  s += c.scales == Scales::kExtreme      ? " extreme"
       : c.scales == Scales::kWithNaN   ? " nan"
       : c.scales == Scales::kSigned    ? " signed"
       : c.scales == Scales::kSignedHuge ? " signed-huge"
       : c.scales == Scales::kRealMxfp4  ? " real-mxfp4"
                                         : "";
  return s;
}

// So that gtest prints a case by name (ctest lists them, and skips them without a GPU).
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

struct Built {
  TensorDesc desc;
  std::map<Role, std::vector<uint8_t>> comps;
};

uint32_t seed_once() {
  static const uint32_t s = [] {
    uint32_t v = std::random_device{}();
    std::printf("kernel cases: random seed %u\n", v);
    return v;
  }();
  return s;
}

bool is_int_group(const Case& c) { return c.format.rfind("int", 0) == 0; }

// An int_group case's parameters, from its name (Case::format).
nlohmann::json int_group_case_params(const Case& c) {
  const std::string& f = c.format;
  const uint64_t group = std::stoull(f.substr(f.find("-g") + 2));
  auto has = [&](const char* tag) { return f.find(tag) != std::string::npos; };
  nlohmann::json p = {{"bits", f[3] - '0'},
                      {"group_size", group ? group : std::max<uint64_t>(c.shape.back(), 1)},
                      {"scale_dtype", has("-bf16") ? "bf16" : has("-f32") || has("-post") ? "f32" : "f16"},
                      {"zero_points", has("-zp")},
                      {"act_order", has("-perm")}};
  if (has("-post")) p["post_factor"] = double(quant::kLlmInt8PostFactor);
  return p;
}

// The layout build() gives `c`: its own tile, or the converter's choice (choose_layout on the
// format, the shape and the 64-element bitsandbytes blocks build() writes).
Layout layout_of(const Case& c) {
  if (c.tile_n) return Layout{LayoutKind::kTiled, c.tile_n, c.tile_k};
  TensorDesc d;
  d.shape = c.shape;
  if (is_int_group(c)) {
    d.format = Format::kIntGroup;
    d.params = int_group_case_params(c);
    return choose_layout(d, kDefaultTileN, kDefaultTileK);
  }
  d.format = c.format == "mxfp4" ? Format::kMxfp4 : c.format.rfind("nvfp4", 0) == 0 ? Format::kNvfp4 : c.format.rfind("nf4", 0) == 0 ? Format::kNf4
             : c.format == "bnb_fp4" ? Format::kBnbFp4 : Format::kFp8E4M3;
  if (d.format == Format::kNf4 || d.format == Format::kBnbFp4) d.params = {{"block_size", c.format == "nf4-b128" ? 128 : 64}};
  return choose_layout(d, kDefaultTileN, kDefaultTileK);
}

// A descriptor and random component bytes for `c`. Codes are made row-major, then tiled
// with the formats/ tiler (itself tested against tiled_byte_offset).
Built build(const Case& c, std::mt19937& rng) {
  Built b;
  TensorDesc& d = b.desc;
  d.name = name_of(c);
  d.shape = c.shape;
  d.dtype = DType::kBF16;
  const uint64_t n = c.shape[c.shape.size() - 2], k = c.shape.back();
  uint64_t batch = 1, numel = 1;
  for (size_t i = 0; i + 2 < c.shape.size(); ++i) batch *= c.shape[i];
  for (auto s : c.shape) numel *= s;
  auto bytes = [&](uint64_t count, int lo = 0, int hi = 255) {
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<uint8_t> v(count);
    for (auto& x : v) x = uint8_t(dist(rng));
    return v;
  };
  auto floats = [&](uint64_t count, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<uint8_t> v(count * 4);
    for (uint64_t i = 0; i < count; ++i) {
      float f = dist(rng);
      std::memcpy(&v[i * 4], &f, 4);
    }
    return v;
  };
  // Float scale values for the signed regimes, as FP32 (BF16 scales take their rounding).
  auto signed_values = [&](uint64_t count) {
    std::uniform_real_distribution<float> log_mag(c.scales == Scales::kSignedHuge ? 25.f : -4.f, c.scales == Scales::kSignedHuge ? 30.f : 1.f);
    std::vector<float> v(count);
    for (auto& f : v) {
      const uint32_t r = rng();
      f = std::pow(10.f, log_mag(rng));
      if (c.scales == Scales::kSigned && r % 16 == 1) f = 0.f;
      if (c.scales == Scales::kSigned && r % 16 == 2) f = std::ldexp(float(1 + rng() % 1000), -140);  // subnormal
      if (r & 0x100) f = -f;
    }
    return v;
  };
  auto f32_bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  const bool signed_scales = c.scales == Scales::kSigned || c.scales == Scales::kSignedHuge;
  std::vector<uint8_t> rows;  // row-major codes
  if (c.format == "mxfp4") {
    d.format = Format::kMxfp4;
    d.params = {{"block_size", 32}, {"element", "e2m1"}, {"scale_encoding", "e8m0"}, {"nibble_order", "low_first"}};
    rows = bytes(batch * n * round_up(k, 32) / 2);
    const uint64_t ns = batch * n * ceil_div(k, 32);
    b.comps[Role::kScales] = c.scales == Scales::kExtreme ? bytes(ns, 0, 254) : c.scales == Scales::kWithNaN ? bytes(ns, 250, 255)
                             : c.scales == Scales::kRealMxfp4 ? bytes(ns, 100, 128) : bytes(ns, 100, 140);
    if (c.scales == Scales::kRealMxfp4) {
      std::uniform_int_distribution<int> one_in(0, 199), large(129, 140);
      for (auto& e : b.comps[Role::kScales]) if (one_in(rng) == 0) e = uint8_t(large(rng));
    }
  } else if (c.format.rfind("nvfp4", 0) == 0) {
    // nvfp4: ModelOpt's convention (tensor scale multiplies, code 8 +0); nvfp4-ct:
    // compressed-tensors' (divides, code 8 -0). Random E4M3 block scales (no NaN byte unless
    // asked) and one FP32 tensor scale a matrix.
    const bool ct = c.format == "nvfp4-ct";
    d.format = Format::kNvfp4;
    std::vector<uint64_t> prefix(c.shape.begin(), c.shape.end() - 2);
    d.params = {{"block_size", 16}, {"element", "e2m1"}, {"scale_encoding", "e4m3"}, {"nibble_order", "low_first"},
                {"tensor_scale", ct ? "divides" : "multiplies"}, {"negative_zero", ct}, {"tensor_scale_shape", prefix}};
    rows = bytes(batch * n * round_up(k, 16) / 2);
    auto& sc = b.comps[Role::kScales] = bytes(batch * n * ceil_div(k, 16), 0, 0x7e);  // positive, no NaN
    if (c.scales == Scales::kWithNaN || c.scales == Scales::kSigned)
      for (auto& x : sc) x = uint8_t(rng()) ;  // every byte: NaN (0x7F, 0xFF) and negative scales too
    b.comps[Role::kTensorScale] = signed_scales ? f32_bytes(signed_values(batch))
                                  : c.scales == Scales::kExtreme ? floats(batch, 1e-30f, 1e30f)
                                  : ct ? floats(batch, 100.f, 5000.f) : floats(batch, 1e-4f, 1e-2f);
    if (c.scales == Scales::kWithNaN && batch) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(b.comps[Role::kTensorScale].data(), &nan, 4);
    }
  } else if (is_int_group(c)) {
    // int_group: random codes of `bits` packed as FORMAT.md 4.5 says (rows of stored_k codes,
    // the padding 0), scales of the case's dtype (signed, zero, subnormal and huge in the
    // signed regimes), zero points over the code range, and a random permutation a matrix.
    d.format = Format::kIntGroup;
    d.params = int_group_case_params(c);
    const uint32_t bits = d.params["bits"].get<uint32_t>();
    const uint64_t group = d.params["group_size"].get<uint64_t>(), groups = ceil_div(k, group), row_bytes = round_up(k, 8) * bits / 8;
    rows.assign(batch * n * row_bytes, 0);
    for (uint64_t r = 0; r < batch * n; ++r)
      for (uint64_t j = 0; j < k; ++j) quant::int_group_put_code(rows.data() + r * row_bytes, bits, j, uint32_t(rng()) & ((1u << bits) - 1u));
    const std::string sdt = d.params["scale_dtype"].get<std::string>();
    const uint64_t ns = batch * n * groups;
    std::vector<float> sv = signed_scales ? signed_values(ns) : std::vector<float>(ns);
    if (!signed_scales) {
      std::uniform_real_distribution<float> dist(1e-3f, 1e-1f);
      for (auto& f : sv) f = c.scales == Scales::kExtreme ? std::ldexp(dist(rng), int(rng() % 200) - 100) : dist(rng);
    }
    if (sdt == "f32") {
      b.comps[Role::kScales] = f32_bytes(sv);
    } else {
      std::vector<uint8_t> v(ns * 2);
      for (uint64_t i = 0; i < ns; ++i) {
        const uint16_t h = sdt == "bf16" ? f32_to_bf16(sv[i]) : f32_to_f16(sv[i]);
        std::memcpy(&v[i * 2], &h, 2);
      }
      b.comps[Role::kScales] = v;
    }
    if (d.params["zero_points"].get<bool>()) b.comps[Role::kZeroPoints] = bytes(ns, 0, int(1u << bits) - 1);
    if (d.params["act_order"].get<bool>()) {
      std::vector<uint32_t> perm(batch * k);
      for (uint64_t m = 0; m < batch; ++m) {
        for (uint64_t j = 0; j < k; ++j) perm[m * k + j] = uint32_t(j);
        std::shuffle(perm.begin() + m * k, perm.begin() + (m + 1) * k, rng);
      }
      b.comps[Role::kPermutation].resize(perm.size() * 4);
      if (!perm.empty()) std::memcpy(b.comps[Role::kPermutation].data(), perm.data(), perm.size() * 4);
    }
  } else if (c.format.rfind("nf4", 0) == 0 || c.format == "bnb_fp4") {
    // nf4: blocks of 64, double quantization; nf4-b128: blocks of 128; nf4-fp32-absmax: no
    // double quantization (an FP32 absmax a block).
    const bool fp4 = c.format == "bnb_fp4", dq = c.format != "nf4-fp32-absmax";
    const uint64_t block = c.format == "nf4-b128" ? 128 : 64;
    d.format = fp4 ? Format::kBnbFp4 : Format::kNf4;
    const uint64_t nabs = ceil_div(numel, block);
    if (dq)
      d.params = {{"block_size", block}, {"double_quant", true}, {"nested_block_size", 256}, {"nested_offset", 0.0732421875},
                  {"nibble_order", "high_first"}, {"quant_state_bytes", 0}};
    else
      d.params = {{"block_size", block}, {"double_quant", false}, {"nibble_order", "high_first"}, {"quant_state_bytes", 0}};
    rows = bytes(ceil_div(numel, 2));
    auto absmax_floats = [&](uint64_t count) {
      return signed_scales ? f32_bytes(signed_values(count)) : c.scales == Scales::kExtreme ? floats(count, 1e-30f, 1e30f) : floats(count, 0.01f, 0.2f);
    };
    b.comps[Role::kAbsmax] = dq ? bytes(nabs) : absmax_floats(nabs);
    if (dq) b.comps[Role::kNestedAbsmax] = absmax_floats(ceil_div(nabs, 256));
    std::vector<uint8_t> table(16 * 4), nested(256 * 4);
    for (int i = 0; i < 16; ++i) {
      float v = fp4 ? quant::bnb_fp4_to_f32(uint8_t(i)) : quant::nf4_to_f32(uint8_t(i));
      std::memcpy(&table[i * 4], &v, 4);
    }
    for (int i = 0; i < 256; ++i) { float v = quant::dynamic_map_value(uint8_t(i)); std::memcpy(&nested[i * 4], &v, 4); }
    b.comps[Role::kCodeTable] = table;
    if (dq) b.comps[Role::kNestedCodeTable] = nested;
  } else {
    d.format = Format::kFp8E4M3;
    const bool nan_free = c.scales != Scales::kWithNaN;
    rows = bytes(numel);
    if (nan_free)
      for (auto& x : rows) if ((x & 0x7f) == 0x7f) x &= 0xfe;
    const bool sized_group = c.format == "fp8-group128" || c.format == "fp8-group24";
    const bool half_scales = c.format == "fp8-bf16" || c.format == "fp8-f16";
    const bool odd_blocks = c.format == "fp8-block48x192";
    std::string g = half_scales || odd_blocks ? "block" : sized_group ? "group" : c.format.substr(4);
    const uint64_t group = sized_group ? std::stoull(c.format.substr(9)) : 48;
    const uint64_t block_n = odd_blocks ? 48 : 128, block_k = odd_blocks ? 192 : 128;
    uint64_t ns = g == "tensor" ? batch : g == "channel" ? batch * n : g == "block" ? batch * ceil_div(n, block_n) * ceil_div(k, block_k) : batch * n * ceil_div(k, group);
    const char* scale_dtype = c.format == "fp8-bf16" ? "bf16" : c.format == "fp8-f16" ? "f16" : "f32";
    d.params = {{"scale_granularity", g}, {"scale_dtype", scale_dtype}, {"scale_shape", std::vector<uint64_t>{ns}},
                {"scale_name", "weight_scale_inv"}};
    if (g == "block") { d.params["block_n"] = block_n; d.params["block_k"] = block_k; }
    if (g == "group") d.params["group_size"] = group;
    if (half_scales) {
      std::vector<uint8_t> v(ns * 2);
      std::uniform_real_distribution<float> dist(1e-4f, 1e-2f);
      const std::vector<float> sv = signed_scales ? signed_values(ns) : std::vector<float>{};
      for (uint64_t i = 0; i < ns; ++i) {
        const float f = signed_scales ? sv[i] : dist(rng);
        const uint16_t h = c.format == "fp8-bf16" ? f32_to_bf16(f) : f32_to_f16(f);
        std::memcpy(&v[i * 2], &h, 2);
      }
      b.comps[Role::kScales] = v;
    } else if (signed_scales) {
      b.comps[Role::kScales] = f32_bytes(signed_values(ns));
    } else {
      b.comps[Role::kScales] = c.scales == Scales::kExtreme ? floats(ns, 1e-38f, 3e-38f) : floats(ns, 1e-4f, 1e-2f);
    }
  }
  d.layout = layout_of(c);
  if (d.layout.kind == LayoutKind::kTiled) {
    auto g = matrix_geometry(d);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    std::vector<uint8_t> tiled(g->batch * g->padded_n * g->padded_row_bytes());
    const uint64_t sb = stripe_bytes(*g, d.layout.tile_n);
    for (uint64_t m = 0; m < g->batch; ++m)
      for (uint64_t r = 0; r < g->padded_n; r += d.layout.tile_n)
        tile_stripe(*g, d.layout.tile_n, d.layout.tile_k, r < g->n ? rows.data() + (m * g->n + r) * g->row_bytes() : nullptr, r,
                    tiled.data() + m * g->padded_n * g->padded_row_bytes() + (r / d.layout.tile_n) * sb);
    b.comps[Role::kCodes] = tiled;
  } else {
    b.comps[Role::kCodes] = rows;
  }
  auto specs = component_specs(d);
  EXPECT_TRUE(specs.is_ok()) << specs.status().message();
  for (const auto& s : *specs) EXPECT_EQ(b.comps[s.role].size(), s.bytes) << d.name << " " << role_name(s.role);
  return b;
}

struct Gpu {
  std::map<Role, void*> ptrs;
  ~Gpu() { for (auto& [k, p] : ptrs) cudaFree(p); }
};

// Copies a built tensor's components to the device.
void upload(const Built& b, Gpu& gpu, DevicePointers& dev, ComponentBytes* host = nullptr) {
  for (auto& [role, v] : b.comps) {
    if (host) (*host)[int(role)] = v;
    ASSERT_EQ(cudaMalloc(&gpu.ptrs[role], std::max<size_t>(v.size(), 16)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu.ptrs[role], v.data(), v.size(), cudaMemcpyHostToDevice), cudaSuccess);
    dev[int(role)] = gpu.ptrs[role];
  }
}

// A case built from rng, its components on the device (and kept on the host), and its view:
// each test's first steps.
struct OnDevice {
  Built b;
  Gpu gpu;
  DevicePointers dev{};
  ComponentBytes host;
  QuantView view{};
};
// MXFP4 codes into the kernels' bit-plane order on the device, as uploads put them
// (cuda_mxfp4_to_planes), and every word read back equal to the host's word rearranged.
void to_planes(OnDevice& d) {
  ASSERT_EQ(d.view.format, ViewFormat::kMxfp4);
  ASSERT_TRUE(cuda_mxfp4_to_planes(d.view, nullptr).is_ok());
  EXPECT_FALSE(cuda_mxfp4_to_planes(d.view, nullptr).is_ok()) << "a second rearrangement must be refused";
  const auto& codes = d.host[int(Role::kCodes)];
  std::vector<uint32_t> got(codes.size() / 4);
  ASSERT_EQ(cudaMemcpy(got.data(), d.view.codes, codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t w;
    std::memcpy(&w, codes.data() + 4 * i, 4);
    ASSERT_EQ(got[i], mxfp4_word_to_planes(w)) << d.b.desc.name << ": code word " << i;
  }
}

// kernel_order: MXFP4 codes as uploads leave them (the order the tensor-core GEMVs take).
void build_on_device(const Case& c, std::mt19937& rng, OnDevice& d, bool kernel_order = true) {
  d.b = build(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(d.b, d.gpu, d.dev, &d.host));
  auto view = make_quant_view(d.b.desc, d.dev);
  ASSERT_TRUE(view.is_ok()) << view.status().message();
  d.view = *view;
  if (kernel_order && d.view.format == ViewFormat::kMxfp4) {
    ASSERT_NO_FATAL_FAILURE(to_planes(d));
  }
  // NVFP4 tensor scales classified as uploads classify them (QuantView::nvfp4_mma_safe), from
  // the host's copy; the device-read version must agree.
  if (d.view.format == ViewFormat::kNvfp4) {
    d.view.nvfp4_mma_safe = nvfp4_tensor_scales_mma_safe(d.host[int(Role::kTensorScale)], d.view.nvfp4_divides);
    QuantView again = d.view;
    again.nvfp4_mma_safe = !d.view.nvfp4_mma_safe;
    ASSERT_TRUE(cuda_nvfp4_mark_mma_safe(again).is_ok());
    EXPECT_EQ(again.nvfp4_mma_safe, d.view.nvfp4_mma_safe);
  }
}

class KernelCases : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto d = query_device(0);
    if (!d.is_ok()) GTEST_SKIP() << "no CUDA GPU device here (" << d.status().message() << "); these run on the GPU machine";
    device_ = *d;
  }
  DeviceInfo device_;
};

// The driver loads the build's best code for the device: the machine code of the device's
// own architecture if the build has it (sm_90a counts as 90), else the newest PTX not newer
// than the device. DeviceInfo::kernel_arch must say which, since it picks the kernels' paths.
TEST(KernelArch, TheLoadedCodeIsTheBuildsBestForTheDevice) {
  auto d = query_device(0);
  if (!d.is_ok()) GTEST_SKIP() << "no CUDA GPU device here (" << d.status().message() << "); this runs on the GPU machine";
  const int cc = d->cc_major * 10 + d->cc_minor;
  int want = 0;
  std::string list = IRIS_TEST_GENCODE, item;
  std::stringstream ss(list);
  while (std::getline(ss, item, ',')) {
    const bool sass = item.rfind("sm_", 0) == 0;
    const int arch = std::stoi(item.substr(item.find('_') + 1));
    const bool loadable = sass ? arch / 10 == cc / 10 && arch <= cc : arch <= cc;  // SASS runs within its major version
    if (loadable) want = std::max(want, arch);
  }
  std::printf("kernel code: compute_%d loaded on %s (compute capability %d.%d), build targets %s\n", d->kernel_arch, d->name.c_str(),
              d->cc_major, d->cc_minor, IRIS_TEST_GENCODE);
  EXPECT_EQ(d->kernel_arch, want);
  // The tensor-core GEMV is chosen exactly where the loaded code has BF16 mma.
  QuantView v{};
  v.format = ViewFormat::kMxfp4;
  v.rows = v.n = v.padded_n = 16;
  v.k = v.padded_k = v.tile_k = 256;
  v.tile_n = 16;
  v.tiled = true;
  EXPECT_FALSE(cuda_gemv_uses_tensor_cores(v, 1, d->launch_config())) << "MXFP4 codes in the archive's nibble order";
  v.codes_planes = true;
  EXPECT_EQ(cuda_gemv_uses_tensor_cores(v, 1, d->launch_config()), d->kernel_arch >= 80);
}

TEST_P(KernelCases, DequantBitExactAndGemvWithinBound) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()))));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d, false));
  const Built& b = d.b;
  const ComponentBytes& host = d.host;
  const QuantView* view = &d.view;
  const uint64_t numel = view->rows * view->k;
  std::vector<float> ref(numel);
  ASSERT_TRUE(reference_decode(b.desc, host, ref.data()).is_ok());
  // MXFP4 twice: its codes in the archive's nibble order (dequant and the CUDA-core GEMV; the
  // tensor-core one refuses it), then rearranged as uploads leave them (every kernel).
  const int orders = view->format == ViewFormat::kMxfp4 ? 2 : 1;
  for (int order = 0; order < orders; ++order) {
  if (order == 1) {
    ASSERT_NO_FATAL_FAILURE(to_planes(d));
  }
  std::string label = name_of(GetParam());
  if (orders == 2) label.append(order == 0 ? " (nibble order)" : " (bit planes)");

  // Every dequant variant (items per thread, 8- or 16-element items) must give the same bits;
  // BF16 takes the packed fast path, F32 the scalar decoder. 16-element items fall back to 8
  // where the tensor does not allow them (dequant_words), and the cases include such tensors.
  struct Run { DType out; const char* unroll; int item; };
  for (Run run : {Run{DType::kF32, "auto", 0}, Run{DType::kF16, "auto", 0}, Run{DType::kBF16, "auto", 0}, Run{DType::kBF16, "2", 8},
                  Run{DType::kBF16, "4", 8}, Run{DType::kBF16, "8", 8}, Run{DType::kBF16, "1", 16}, Run{DType::kBF16, "2", 16},
                  Run{DType::kBF16, "4", 16}}) {
    const DType out = run.out;
    LaunchConfig launch = device_.launch_config();
    launch.variants.dequant_unroll = std::string(run.unroll) == "auto" ? 0 : std::stoi(run.unroll);
    launch.variants.dequant_words = run.item / 8;
    const size_t es = out == DType::kF32 ? 4 : 2;
    void* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_out, std::max<size_t>(numel * es, 16)), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0xa5, numel * es), cudaSuccess);  // poison
    Status s = cuda_dequantize(*view, d_out, out, nullptr, launch);
    ASSERT_TRUE(s.is_ok()) << s.message();
    std::vector<uint8_t> got(numel * es);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_out);
    for (uint64_t i = 0; i < numel; ++i) {
      uint32_t g = 0, want = out == DType::kF32 ? f32_bits(ref[i]) : out == DType::kF16 ? f32_to_f16(ref[i]) : f32_to_bf16(ref[i]);
      std::memcpy(&g, &got[i * es], es);
      if (g != want) {
        ADD_FAILURE() << label << (out == DType::kF32 ? " f32" : out == DType::kF16 ? " f16" : " bf16") << " unroll " << run.unroll << " item " << run.item << ": first mismatch at element " << i << " (row "
                      << i / view->k << ", col " << i % view->k << "): gpu " << std::hex << g << " cpu " << want;
        break;
      }
    }
  }
  if (b.desc.layout.kind != LayoutKind::kTiled) return;  // GEMV needs rows
  // Both GEMV kernels where the tensor-core one applies, so the CUDA-core fallback stays tested.
  // The tensor-core kernel runs with each unroll (chunks loaded ahead), with and without the
  // rolling prefetch, a fixed warp count
  // (1 and 5), both FP8 decoders, both exact NF4 lookups and the declared BF16 table (64- and
  // 128-column chunks, with and without the prefetch) at batches 1 and 9; as a plain launch and
  // with the L2 prefetch (where the default is a programmatic dependent launch, sm_90 code);
  // and with x written late by a producer that lets the GEMV start at once (late_writer.h: a
  // GEMV that read x before waiting would sum zeros), releasing its own dependents early or late.
  const bool is_fp8 = view->format == ViewFormat::kFp8, is_nf4 = view->format == ViewFormat::kNf4;
  // NF4's declared BF16 table (LaunchConfig::nf4_bf16_table) has two oracles, each of which
  // the kernel must match within the exact table's bound (and the true reference within the
  // declared one): its default kernels' weights, bitsandbytes' bf16(bf16(t) * bf16(absmax))
  // (nf4_bnb_weights.h); and, for the kernels that apply the absmax to FP32 partial sums
  // (KernelVariants::nf4_scaled off), the CPU reference with each table value rounded to BF16.
  std::vector<float> ref_bf16_table, ref_bnb;
  if (is_nf4) {
    ASSERT_TRUE(test::nf4_bnb_weights(b.desc, host, ref, ref_bnb)) << label;
    const auto& table = host[int(Role::kCodeTable)];
    std::vector<float> rounded(table.size() / 4);
    std::memcpy(rounded.data(), table.data(), table.size());
    for (float& t : rounded) t = bf16_to_f32(f32_to_bf16(t));
    ComponentBytes host_rounded = host;
    host_rounded[int(Role::kCodeTable)] = {reinterpret_cast<const uint8_t*>(rounded.data()), table.size()};
    ref_bf16_table.resize(numel);
    ASSERT_TRUE(reference_decode(b.desc, host_rounded, ref_bf16_table.data()).is_ok());
  }
  for (const char* gemv : {"auto", "cuda-cores", "unroll-1", "unroll-2", "prefetch-off", "prefetch-on", "warps-1", "warps-5", "warps-16", "nf4-bf16-table-warps-16", "nf4-bf16-table-permute", "nf4-bf16-table-permute-prefetch", "nf4-bf16-table-permute-unroll-2", "fp8-cvt", "fp8-bits", "nf4-split", "nf4-pairs", "nf4-bf16-table", "nf4-bf16-table-prefetch", "nf4-bf16-table-unroll-2", "nf4-bf16-table-factored", "nf4-bf16-table-factored-prefetch", "nf4-bf16-table-chunk-128", "nf4-bf16-table-chunk-128-prefetch", "plain-launch", "l2-prefetch", "spread-off", "late-x", "late-x-unroll-1", "late-x-release-late"})
  for (int batch : {1, 2, 3, 4, 8, 9, 16}) {
    const std::string variant = gemv;
    if (variant != "auto" && !gemv_mma_supports(*view, batch)) continue;  // the CUDA-core kernel ran in the "auto" pass
    if (variant != "auto" && variant != "cuda-cores" && batch != 1 && batch != 9) continue;
    if ((variant.rfind("fp8-", 0) == 0 && !is_fp8) || (variant.rfind("nf4-", 0) == 0 && !is_nf4)) continue;
    LaunchConfig launch = device_.launch_config();
    launch.variants.gemv_tensor_cores = variant != "cuda-cores";
    launch.variants.gemv_unroll = variant.rfind("unroll-", 0) == 0 ? std::stoi(variant.substr(7)) : 0;
    launch.variants.gemv_warps = variant.rfind("warps-", 0) == 0 ? std::stoi(variant.substr(6)) : 0;
    if (variant == "nf4-bf16-table-warps-16") launch.variants.gemv_warps = 16;  // more than the prefetch step's bound: unroll 1
    launch.variants.gemv_prefetch = variant == "prefetch-off" ? 1 : variant == "prefetch-on" ? 2 : 0;
    launch.variants.fp8_decode = variant == "fp8-cvt" ? 1 : variant == "fp8-bits" ? 2 : 0;
    launch.variants.nf4_table = variant == "nf4-split" ? 1 : variant == "nf4-pairs" ? 2 : 0;
    launch.nf4_bf16_table = variant.rfind("nf4-bf16-table", 0) == 0;  // a declared precision, with its own bound
    if (variant.find("-prefetch") != std::string::npos) launch.variants.gemv_prefetch = 2;
    if (variant.find("-chunk-128") != std::string::npos) launch.variants.nf4_chunk = 2;  // 128 columns where tile_k allows
    const bool factored = variant.find("-factored") != std::string::npos || variant.find("-chunk-128") != std::string::npos;
    if (launch.nf4_bf16_table) launch.variants.nf4_scaled = factored ? 1 : 2;
    if (variant == "nf4-bf16-table-unroll-2" || variant == "nf4-bf16-table-permute-unroll-2") launch.variants.gemv_unroll = 2;
    if (variant.rfind("nf4-bf16-table-permute", 0) == 0) launch.variants.nf4_lookup = 2;
    launch.variants.programmatic = variant == "plain-launch" ? 1 : variant == "late-x-release-late" ? 3 : 0;
    launch.variants.gemv_l2_prefetch = variant == "l2-prefetch" ? 2 : 0;
    launch.variants.gemv_spread = variant == "spread-off" ? 1 : 0;
    if (variant == "late-x-unroll-1") launch.variants.gemv_unroll = 1;
    const bool late = variant.rfind("late-x", 0) == 0;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> x(batch * view->k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    void *dx, *dy, *dstaging;
    ASSERT_EQ(cudaMalloc(&dx, std::max<size_t>(x.size() * 2, 16)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dstaging, std::max<size_t>(x.size() * 2, 16)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, std::max<size_t>(batch * view->rows * 4, 16)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(late ? dstaging : dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy, 0xff, batch * view->rows * 4), cudaSuccess);
    cudaStream_t stream = nullptr;
    if (late) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(test::write_late(dx, dstaging, x.size() * 2, stream), cudaSuccess);
    }
    Status s = cuda_gemv(*view, static_cast<const uint16_t*>(dx), batch, dy, DType::kF32, stream, launch);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (stream) cudaStreamDestroy(stream);
    cudaFree(dstaging);
    std::vector<float> y(batch * view->rows);
    ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dx);
    cudaFree(dy);
    // The bound of the kernel that ran (verify/gemv_bound.h states each).
    const auto acc = gemv_accumulation(cuda_gemv_uses_tensor_cores(*view, batch, launch), is_nf4 && launch.nf4_bf16_table);
    for (int bi = 0; bi < batch; ++bi) {
      CheckResult r = check_gemv_row_sums(ref.data(), x.data() + bi * view->k, view->rows, view->k, y.data() + bi * view->rows, "gemv", acc);
      EXPECT_TRUE(r.ok) << label << " batch " << batch << " " << variant
                        << (acc == GemvAccumulation::kFp32 ? " cuda cores" : " tensor cores")
                        << " row-set " << bi << ": " << r.detail;
      if (acc != GemvAccumulation::kTensorCoresBf16Table) continue;
      r = check_gemv_row_sums((factored ? ref_bf16_table : ref_bnb).data(), x.data() + bi * view->k, view->rows, view->k, y.data() + bi * view->rows,
                              "gemv", GemvAccumulation::kTensorCores);
      EXPECT_TRUE(r.ok) << label << " batch " << batch << " " << variant
                        << (factored ? " against the BF16-rounded table's reference" : " against bitsandbytes' BF16 weights") << ", row-set " << bi
                        << ": " << r.detail;
    }
  }
  }  // order
}

// The tensor-core GEMV's launch choices that must not change a bit (run v60): the spread
// (unused shared memory that only changes residency) against none, and, at one warp count (which
// sets the order of the sums), the step modes against each other -- unroll 1 and 2 take MXFP4's
// word-by-word decode with its warp-uniform one-factor step, the prefetch the per-row decode.
TEST_P(KernelCases, StepModesAndSpreadGiveTheSameBits) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " same bits")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  const QuantView& view = d.view;
  if (!view.tiled || view.rows == 0 || view.k == 0) return;
  for (int batch : {1, 9}) {
    if (!gemv_mma_supports(view, batch)) continue;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> x(batch * view.k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    void *dx, *dy;
    const size_t ybytes = std::max<size_t>(batch * view.rows * 4, 16);
    ASSERT_EQ(cudaMalloc(&dx, std::max<size_t>(x.size() * 2, 16)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, ybytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    auto run = [&](const LaunchConfig& launch, std::vector<uint32_t>& y) {
      ASSERT_EQ(cudaMemset(dy, 0xff, ybytes), cudaSuccess);
      ASSERT_TRUE(cuda_gemv_uses_tensor_cores(view, batch, launch));
      ASSERT_TRUE(cuda_gemv(view, static_cast<const uint16_t*>(dx), batch, dy, DType::kF32, nullptr, launch).is_ok());
      y.resize(size_t(batch) * view.rows);
      ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    };
    const LaunchConfig base = device_.launch_config();
    std::vector<uint32_t> spread, plain;
    ASSERT_NO_FATAL_FAILURE(run(base, spread));
    LaunchConfig off = base;
    off.variants.gemv_spread = 1;
    ASSERT_NO_FATAL_FAILURE(run(off, plain));
    EXPECT_EQ(spread, plain) << name_of(GetParam()) << " batch " << batch << ": spread against none";
    for (int cap : {1, 3}) {  // a forced residency cap (gemv_blocks) changes residency alone
      LaunchConfig capped = base;
      capped.variants.gemv_blocks = cap;
      std::vector<uint32_t> y;
      ASSERT_NO_FATAL_FAILURE(run(capped, y));
      EXPECT_EQ(spread, y) << name_of(GetParam()) << " batch " << batch << ": at most " << cap << " blocks a SM against the default";
    }
    std::vector<uint32_t> first;
    for (const char* step : {"unroll-1", "unroll-2", "prefetch-on"}) {
      LaunchConfig launch = base;
      launch.variants.gemv_warps = 4;
      launch.variants.gemv_unroll = std::string(step) == "unroll-2" ? 2 : 1;
      launch.variants.gemv_prefetch = std::string(step) == "prefetch-on" ? 2 : 1;
      std::vector<uint32_t> y;
      ASSERT_NO_FATAL_FAILURE(run(launch, y));
      if (first.empty()) first = y;
      else EXPECT_EQ(y, first) << name_of(GetParam()) << " batch " << batch << ": " << step << " against unroll-1, 4 warps";
    }
    cudaFree(dx);
    cudaFree(dy);
  }
}

// NF4's BF16 table looked up by byte permutes on registers (MmaNf4Permute, nf4_lookup 2)
// against the shared-memory pair table (nf4_lookup 1): the same weights, so the same sums bit
// for bit, at batches 1 and 9, each step mode, the absmax worked out at each chunk and
// precomputed, in the dense and the grouped expert launch.
TEST_P(KernelCases, Nf4RegisterLookupGivesTheSameBits) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " nf4 lookup")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  QuantView view = d.view;
  if (view.format != ViewFormat::kNf4 || !view.tiled || view.rows == 0 || view.k == 0) return;
  void* dabsmax = nullptr;
  ASSERT_EQ(cudaMalloc(&dabsmax, std::max<uint64_t>(nf4_absmax_blocks(view) * 2, 16)), cudaSuccess);
  ASSERT_TRUE(cuda_nf4_absmax_bf16(view, static_cast<uint16_t*>(dabsmax), nullptr).is_ok());
  const uint64_t experts = view.rows / view.n;
  for (int batch : {1, 9}) {
    if (!gemv_mma_supports(view, batch)) continue;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> x(batch * view.k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    std::vector<int32_t> ids(experts);
    for (uint64_t e = 0; e < experts; ++e) ids[e] = int32_t(experts - 1 - e);
    void *dx, *dy, *dids;
    const size_t ybytes = std::max<size_t>(batch * view.rows * 4, 16);
    ASSERT_EQ(cudaMalloc(&dx, std::max<size_t>(x.size() * 2, 16)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, ybytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dids, std::max<size_t>(ids.size() * 4, 16)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    // y: the dense GEMV's outputs, then (batch 1) the grouped launch's, every matrix once.
    auto run = [&](const QuantView& v, const LaunchConfig& launch, std::vector<uint32_t>& y) {
      ASSERT_EQ(cudaMemset(dy, 0xff, ybytes), cudaSuccess);
      ASSERT_TRUE(cuda_gemv_uses_tensor_cores(v, batch, launch));
      Status s = cuda_gemv(v, static_cast<const uint16_t*>(dx), batch, dy, DType::kF32, nullptr, launch);
      ASSERT_TRUE(s.is_ok()) << s.message();
      y.resize(size_t(batch) * v.rows);
      ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      if (batch != 1) return;
      auto set = ExpertSet::create({v}, device_.ordinal, launch);
      ASSERT_TRUE(set.is_ok()) << set.status().message();
      ASSERT_TRUE(set->uses_tensor_cores());
      ASSERT_EQ(cudaMemset(dy, 0xff, ybytes), cudaSuccess);
      s = set->gemv(static_cast<const int32_t*>(dids), nullptr, experts, static_cast<const uint16_t*>(dx), 1, dy, DType::kF32, nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      const size_t dense = y.size();
      y.resize(dense + v.rows);
      ASSERT_EQ(cudaMemcpy(y.data() + dense, dy, v.rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    };
    for (bool precomputed : {false, true}) {
      QuantView v = view;
      v.absmax_bf16 = precomputed ? static_cast<const uint16_t*>(dabsmax) : nullptr;
      for (const char* step : {"unroll-1", "unroll-2", "prefetch-on"}) {
        LaunchConfig launch = device_.launch_config();
        launch.nf4_bf16_table = true;
        launch.variants.nf4_scaled = 2;
        launch.variants.gemv_unroll = std::string(step) == "unroll-2" ? 2 : 1;
        launch.variants.gemv_prefetch = std::string(step) == "prefetch-on" ? 2 : 1;
        std::vector<uint32_t> shared, registers;
        launch.variants.nf4_lookup = 1;
        ASSERT_NO_FATAL_FAILURE(run(v, launch, shared));
        launch.variants.nf4_lookup = 2;
        ASSERT_NO_FATAL_FAILURE(run(v, launch, registers));
        EXPECT_EQ(registers, shared) << name_of(GetParam()) << " batch " << batch << " " << step << (precomputed ? ", absmax precomputed" : "")
                                     << ": the register lookup against the shared-memory table";
      }
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dids);
  }
  cudaFree(dabsmax);
}

// NF4's absmax as one BF16 a block (cuda_nf4_absmax_bf16, QuantView::absmax_bf16): each
// value equal to bf16 of the CPU reference's absmax of that block, and the BF16-table GEMVs
// that read it equal, bit for bit, to the same GEMVs working the absmax out themselves (the
// same factor, the same sums), at batches 1 and 9 and at each step mode.
TEST_P(KernelCases, Nf4PrecomputedAbsmaxGivesTheSameBits) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " absmax")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  const QuantView& view = d.view;
  if (view.format != ViewFormat::kNf4 || !view.tiled) return;  // the GEMVs read it on tiled NF4 only
  const uint64_t numel = view.rows * view.k, blocks = nf4_absmax_blocks(view);
  ASSERT_EQ(blocks, (numel + view.block_size - 1) / view.block_size);
  void* dabsmax = nullptr;
  ASSERT_EQ(cudaMalloc(&dabsmax, std::max<uint64_t>(blocks * 2, 16)), cudaSuccess);
  ASSERT_EQ(cudaMemset(dabsmax, 0xa5, std::max<uint64_t>(blocks * 2, 16)), cudaSuccess);  // poison
  ASSERT_TRUE(cuda_nf4_absmax_bf16(view, static_cast<uint16_t*>(dabsmax), nullptr).is_ok());
  std::vector<uint16_t> got(blocks);
  ASSERT_EQ(cudaMemcpy(got.data(), dabsmax, blocks * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> absmax;
  ASSERT_TRUE(test::nf4_element_absmax(d.b.desc, d.host, numel, absmax));
  for (uint64_t blk = 0; blk < blocks; ++blk) {
    const uint16_t want = f32_to_bf16(absmax[blk * view.block_size]);
    const bool both_nan = std::isnan(bf16_to_f32(want)) && std::isnan(bf16_to_f32(got[blk]));
    ASSERT_TRUE(got[blk] == want || both_nan) << name_of(GetParam()) << " block " << blk << ": gpu " << std::hex << got[blk] << " cpu " << want;
  }
  QuantView pre = view;
  pre.absmax_bf16 = static_cast<const uint16_t*>(dabsmax);
  // The F32 outputs of one launch on `view` and one on `pre`, the same x: [2, batch * rows].
  auto both = [&](const std::vector<uint16_t>& x, int batch, const LaunchConfig& launch, std::vector<uint32_t>& y) {
    void *dx, *dy;
    const size_t ybytes = std::max<size_t>(batch * view.rows * 4, 16);
    ASSERT_EQ(cudaMalloc(&dx, std::max<size_t>(x.size() * 2, 16)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, 2 * ybytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy, 0xff, 2 * ybytes), cudaSuccess);
    ASSERT_TRUE(cuda_gemv(view, static_cast<const uint16_t*>(dx), batch, dy, DType::kF32, nullptr, launch).is_ok());
    ASSERT_TRUE(cuda_gemv(pre, static_cast<const uint16_t*>(dx), batch, static_cast<uint8_t*>(dy) + ybytes, DType::kF32, nullptr, launch).is_ok());
    std::vector<uint32_t> all(2 * ybytes / 4);
    ASSERT_EQ(cudaMemcpy(all.data(), dy, 2 * ybytes, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dx);
    cudaFree(dy);
    const uint64_t outputs = uint64_t(batch) * view.rows;
    y.assign(all.begin(), all.begin() + outputs);
    y.insert(y.end(), all.begin() + ybytes / 4, all.begin() + ybytes / 4 + outputs);
  };
  auto bf16_table = [&] {
    LaunchConfig launch = device_.launch_config();
    launch.nf4_bf16_table = true;
    launch.variants.nf4_scaled = 2;
    return launch;
  };
  for (int batch : {1, 9})
    for (const char* step : {"auto", "prefetch-on", "unroll-1", "unroll-2"}) {
      if (!gemv_mma_supports(view, batch)) continue;
      LaunchConfig launch = bf16_table();
      launch.variants.gemv_prefetch = std::string(step) == "prefetch-on" ? 2 : 1;
      launch.variants.gemv_unroll = std::string(step) == "unroll-1" ? 1 : std::string(step) == "unroll-2" ? 2 : 0;
      if (std::string(step) == "auto") launch.variants.gemv_prefetch = 0;
      ASSERT_TRUE(cuda_gemv_uses_tensor_cores(view, batch, launch));
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<uint16_t> x(batch * view.k);
      for (auto& v : x) v = f32_to_bf16(dist(rng));
      std::vector<uint32_t> y;
      ASSERT_NO_FATAL_FAILURE(both(x, batch, launch, y));
      const uint64_t outputs = y.size() / 2;
      for (uint64_t i = 0; i < outputs; ++i)
        ASSERT_EQ(y[i], y[outputs + i]) << name_of(GetParam()) << " batch " << batch << " " << step << " output " << i;
    }
  // The control: with every precomputed absmax replaced by 1, the same launch must give other
  // sums, so the equality above is the kernel reading them, not ignoring them.
  if (gemv_mma_supports(view, 1) && view.rows * view.k > 0) {
    const std::vector<uint16_t> ones(blocks, 0x3f80);
    ASSERT_EQ(cudaMemcpy(dabsmax, ones.data(), blocks * 2, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<uint32_t> y;
    ASSERT_NO_FATAL_FAILURE(both(std::vector<uint16_t>(view.k, f32_to_bf16(1.f)), 1, bf16_table(), y));
    bool differs = false;
    for (uint64_t i = 0; i < view.rows && !differs; ++i) differs = y[i] != y[view.rows + i];
    EXPECT_TRUE(differs) << name_of(GetParam()) << ": absmax 1 everywhere gave the same sums as the true absmax";
  }
  cudaFree(dabsmax);
}

// The grouped expert GEMV (cuda_gemv_experts) against the dense GEMV, bit for bit, on both
// of its paths: with the CUDA-core kernel forced, against cuda_gemv's CUDA-core kernel at
// batch 1 on the whole stack; by default (tensor cores where they apply), against cuda_gemv
// at batch 1 on each expert's matrix alone (matrix_view), or, for an NF4 double-quant matrix
// that has no view of its own, against the CPU reference within the tensor-core bound.
// Random (expert, row) pairs with repeats, one pair with an expert index out of range and
// one with a row out of range (their outputs must be NaN). Experts as the matrices of one
// stack and, where each matrix has a view of its own, as separate tensors (Mixtral's
// per-expert weights). Each oracle is held to the CPU reference first.
// Instantiated only for the cases that have matrices to pick (tiled, N > 0): expert_cases().
class ExpertCases : public KernelCases {};

TEST_P(ExpertCases, ExpertGemvEqualsTheDenseGemvBitForBit) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " experts")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  const Built& b = d.b;
  ASSERT_EQ(b.desc.layout.kind, LayoutKind::kTiled);
  const ComponentBytes& host = d.host;
  const QuantView* view = &d.view;
  const uint64_t n = view->n, k = view->k, experts = n ? view->rows / n : 0;
  ASSERT_GT(experts, 0u);
  const uint64_t x_count = 5, pairs = 2 * experts + 5;
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> x(std::max<uint64_t>(x_count * k, 8));
  for (auto& v : x) v = f32_to_bf16(dist(rng));
  std::vector<int32_t> ids(pairs), rows(pairs);
  for (uint64_t p = 0; p < pairs; ++p) {
    ids[p] = int32_t(rng() % experts);
    rows[p] = int32_t(rng() % x_count);
  }
  ids[1] = int32_t(experts);  // out of range
  rows[2] = int32_t(x_count);  // out of range
  std::vector<float> ref(view->rows * k);
  ASSERT_TRUE(reference_decode(b.desc, host, ref.data()).is_ok());
  std::vector<QuantView> matrices;  // each expert's own view, where it has one
  auto make_matrices = [&] {
    matrices.clear();
    for (uint64_t m = 0; m < experts; ++m) {
      auto mv = matrix_view(*view, m);
      if (!mv.is_ok()) break;  // NF4 double quant: a matrix may start inside a nested block
      matrices.push_back(*mv);
    }
  };
  make_matrices();

  void *dx, *dfull, *dids, *drows, *dy;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dfull, std::max<uint64_t>(x_count * view->rows * 4, 16)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dids, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drows, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, std::max<uint64_t>(pairs * n * 4, 16)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dids, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(drows, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);

  // Passes: the CUDA-core kernel forced; the tensor cores by default (the dense launch may
  // take the rolling prefetch where the expert launch does not: kernels/tuning.cpp), with the
  // prefetch forced off and forced on (the oracle, cuda_gemv on each matrix, runs with the
  // same variants); and by default with the router's picks written late by a producer that
  // lets the expert GEMV start at once (late_writer.h: one that read them before waiting
  // would take expert 0 for every pair); for NF4, with the declared BF16 table: its default
  // kernels (the absmax on the BF16 weights), and the absmax on the partial sums in 128- and
  // 64-column chunks; pass 9, 16 warps a stripe (beyond the automatic choice; NF4 as pass 8);
  // pass 10, NF4's BF16 table in registers (MmaNf4Permute), the absmax precomputed.
  void* dstaging = nullptr;
  ASSERT_EQ(cudaMalloc(&dstaging, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dstaging, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // Pass 8: NF4's BF16 table reading the absmax as bf16(absmax) a block (QuantView::absmax_bf16,
  // as an upload with that table has it), on the stack and on each matrix's view.
  void* dabsmax = nullptr;
  if (view->format == ViewFormat::kNf4) {
    ASSERT_EQ(cudaMalloc(&dabsmax, std::max<uint64_t>(nf4_absmax_blocks(*view) * 2, 16)), cudaSuccess);
    ASSERT_TRUE(cuda_nf4_absmax_bf16(*view, static_cast<uint16_t*>(dabsmax), nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  for (int pass : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
    if (((pass >= 5 && pass <= 8) || pass == 10) && view->format != ViewFormat::kNf4) continue;  // the other formats would run passes 5 to 8 as pass 1
    if (pass == 8) {
      d.view.absmax_bf16 = static_cast<const uint16_t*>(dabsmax);
      make_matrices();
    }
    LaunchConfig launch = device_.launch_config();
    launch.variants.gemv_tensor_cores = pass != 0;
    launch.variants.gemv_prefetch = pass == 2 ? 1 : pass == 3 ? 2 : 0;
    launch.variants.gemv_warps = pass == 9 ? 16 : 0;
    launch.variants.nf4_lookup = pass == 10 ? 2 : 0;
    launch.nf4_bf16_table = pass >= 5;               // NF4's declared BF16 table ...
    launch.variants.nf4_scaled = pass == 6 || pass == 7 ? 1 : 0;  // ... with the absmax on the partial sums
    launch.variants.nf4_chunk = pass == 6 ? 2 : 0;   // in 128-column chunks where tile_k allows, then 64
    auto probe = ExpertSet::create({*view}, device_.ordinal, launch);
    ASSERT_TRUE(probe.is_ok()) << probe.status().message();
    const bool tc = probe->uses_tensor_cores();
    const std::string path = !tc ? "cuda cores" : pass == 2 ? "tensor cores, prefetch off" : pass == 3 ? "tensor cores, prefetch on" : pass == 4 ? "tensor cores, ids written late" : pass == 5 ? "tensor cores, NF4 BF16 table" : pass == 6 ? "tensor cores, NF4 BF16 table, absmax on the sums, 128-column chunks" : pass == 7 ? "tensor cores, NF4 BF16 table, absmax on the sums" : pass == 8 ? "tensor cores, NF4 BF16 table, absmax precomputed" : pass == 9 ? "tensor cores, 16 warps" : pass == 10 ? "tensor cores, NF4 BF16 table in registers" : "tensor cores";
    // The oracle: one activation row at a time, on the whole stack (CUDA cores) or on each
    // expert's own matrix (tensor cores); full[r * rows + e * n + i].
    std::vector<bool> have(experts, !tc);
    for (uint64_t r = 0; r < x_count; ++r) {
      const uint16_t* xr = static_cast<const uint16_t*>(dx) + r * k;
      float* yr = static_cast<float*>(dfull) + r * view->rows;
      if (!tc) {
        Status s = cuda_gemv(*view, xr, 1, yr, DType::kF32, nullptr, launch);
        ASSERT_TRUE(s.is_ok()) << s.message();
        continue;
      }
      for (uint64_t m = 0; m < matrices.size(); ++m) {
        ASSERT_TRUE(cuda_gemv_uses_tensor_cores(matrices[m], 1, launch)) << name_of(GetParam()) << " expert " << m;
        Status s = cuda_gemv(matrices[m], xr, 1, yr + m * n, DType::kF32, nullptr, launch);
        ASSERT_TRUE(s.is_ok()) << s.message();
        have[m] = true;
      }
    }
    std::vector<float> full(x_count * view->rows, 0.f);
    ASSERT_EQ(cudaMemcpy(full.data(), dfull, full.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const auto acc = gemv_accumulation(tc, view->format == ViewFormat::kNf4 && launch.nf4_bf16_table);
    for (uint64_t r = 0; r < x_count; ++r)
      for (uint64_t m = 0; m < experts; ++m) {
        if (!have[m]) continue;
        CheckResult c = check_gemv_row_sums(ref.data() + m * n * k, x.data() + r * k, n, k, full.data() + r * view->rows + m * n, "gemv", acc);
        ASSERT_TRUE(c.ok) << name_of(GetParam()) << " " << path << " oracle row " << r << " expert " << m << ": " << c.detail;
      }

    std::vector<std::pair<std::string, std::vector<QuantView>>> sets = {{"stack", {*view}}};
    if (matrices.size() == experts && experts > 1) sets.push_back({"separate tensors", matrices});
    for (auto& [how, views] : sets) {
      auto set = ExpertSet::create(views, device_.ordinal, launch);
      ASSERT_TRUE(set.is_ok()) << set.status().message();
      ASSERT_EQ(set->count(), experts);
      ASSERT_EQ(set->uses_tensor_cores(), tc) << how;
      for (DType out : {DType::kF32, DType::kBF16}) {
        const size_t es = out == DType::kF32 ? 4 : 2;
        ASSERT_EQ(cudaMemset(dy, 0xa5, std::max<uint64_t>(pairs * n * 4, 16)), cudaSuccess);  // poison
        cudaStream_t stream = nullptr;
        if (pass == 4) {
          ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
          ASSERT_EQ(test::write_late(dids, dstaging, pairs * 4, stream), cudaSuccess);
        }
        Status s = set->gemv(static_cast<const int32_t*>(dids), static_cast<const int32_t*>(drows), pairs,
                             static_cast<const uint16_t*>(dx), x_count, dy, out, stream);
        ASSERT_TRUE(s.is_ok()) << s.message();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        if (stream) cudaStreamDestroy(stream);
        std::vector<uint8_t> y(pairs * n * es);
        ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        int mismatches = 0;
        for (uint64_t p = 0; p < pairs && mismatches < 3; ++p) {
          const bool bad = p == 1 || p == 2;
          if (!bad && !have[ids[p]]) {  // no oracle of its own: the bound against the CPU reference
            if (out == DType::kBF16) continue;  // the bound is stated for FP32 outputs
            std::vector<float> got(n);
            for (uint64_t r = 0; r < n; ++r) {
              uint32_t bits = 0;
              std::memcpy(&bits, &y[(p * n + r) * es], es);
              got[r] = f32_from_bits(bits);
            }
            CheckResult c = check_gemv_row_sums(ref.data() + ids[p] * n * k, x.data() + rows[p] * k, n, k, got.data(), "gemv", acc);
            if (!c.ok && ++mismatches <= 3) ADD_FAILURE() << name_of(GetParam()) << " " << path << " " << how << ": pair " << p << ": " << c.detail;
            continue;
          }
          for (uint64_t r = 0; r < n; ++r) {
            uint32_t got = 0;
            std::memcpy(&got, &y[(p * n + r) * es], es);
            const float want_f = bad ? 0.f : full[rows[p] * view->rows + ids[p] * n + r];
            const uint32_t want = out == DType::kF32 ? f32_bits(want_f) : f32_to_bf16(want_f);
            const bool ok = bad ? (out == DType::kF32 ? std::isnan(f32_from_bits(got)) : std::isnan(bf16_to_f32(uint16_t(got)))) : got == want;
            if (!ok && ++mismatches <= 3)
              ADD_FAILURE() << name_of(GetParam()) << " " << path << " " << how << (out == DType::kF32 ? " f32" : " bf16") << ": pair " << p
                            << " (expert " << ids[p] << ", row " << rows[p] << ") output " << r << ": got " << std::hex << got << " want " << want;
          }
        }
      }
    }
  }
  for (void* p : {dx, dfull, dids, drows, dy, dstaging, dabsmax}) cudaFree(p);
}

// The grouped expert GEMV with gpt-oss's activation in its launch (ExpertSet::gemv_swiglu)
// against the plain launch's BF16 outputs put through the activation's CPU reference
// (expert_swiglu_reference, itself held to an FP64 oracle in decode_reference_test.cpp), bit for
// bit: the sums are the plain launch's, so any difference is the activation's. On the CUDA-core
// kernel, the tensor cores, and for NF4 its declared BF16 table; with and without a bias (some
// of its elements NaN or huge), at gpt-oss's alpha and limit, at a limit that clamps most
// outputs, and with no clamp. An odd N is refused. Bad indices give the pair NaNs.
TEST_P(ExpertCases, SwigluIsThePlainGemvThenTheActivationBitForBit) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " swiglu")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  const QuantView* view = &d.view;
  const uint64_t n = view->n, k = view->k, experts = view->rows / n;
  const uint64_t x_count = 3, pairs = experts + 4;
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> x(std::max<uint64_t>(x_count * k, 8)), bias(experts * n);
  for (auto& v : x) v = f32_to_bf16(4 * dist(rng));
  for (auto& v : bias) v = f32_to_bf16(2 * dist(rng));
  if (bias.size() > 2) bias[1] = 0x7fc0, bias[bias.size() - 1] = f32_to_bf16(3e38f);
  std::vector<int32_t> ids(pairs), rows(pairs);
  for (uint64_t p = 0; p < pairs; ++p) ids[p] = int32_t(rng() % experts), rows[p] = int32_t(rng() % x_count);
  ids[1] = int32_t(experts);   // out of range
  rows[2] = int32_t(x_count);  // out of range
  void *dx, *dbias, *dids, *drows, *dplain, *dgated;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dbias, bias.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dids, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drows, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dplain, pairs * n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dgated, pairs * n * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dbias, bias.data(), bias.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dids, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(drows, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto* ids_p = static_cast<const int32_t*>(dids);
  const auto* rows_p = static_cast<const int32_t*>(drows);
  const auto* x_p = static_cast<const uint16_t*>(dx);
  const auto* bias_p = static_cast<const uint16_t*>(dbias);

  for (int pass : {0, 1, 2}) {
    if (pass == 2 && view->format != ViewFormat::kNf4) continue;
    LaunchConfig launch = device_.launch_config();
    launch.variants.gemv_tensor_cores = pass != 0;
    launch.nf4_bf16_table = pass == 2;
    auto set = ExpertSet::create({*view}, device_.ordinal, launch);
    ASSERT_TRUE(set.is_ok()) << set.status().message();
    const std::string path = !set->uses_tensor_cores() ? "cuda cores" : pass == 2 ? "tensor cores, NF4 BF16 table" : "tensor cores";
    if (n % 2) {
      Status s = set->gemv_swiglu(ids_p, rows_p, pairs, x_p, x_count, bias_p, 1.702f, 7.0f, static_cast<uint16_t*>(dgated), nullptr);
      EXPECT_EQ(s.kind(), ErrorKind::kInvalidArgument) << path << ": an odd N must be refused";
      continue;
    }
    ASSERT_EQ(cudaMemset(dplain, 0xa5, pairs * n * 2), cudaSuccess);
    Status s = set->gemv(ids_p, rows_p, pairs, x_p, x_count, dplain, DType::kBF16, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    std::vector<uint16_t> plain(pairs * n), gated(pairs * n / 2), want(pairs * n / 2);
    ASSERT_EQ(cudaMemcpy(plain.data(), dplain, plain.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (const bool with_bias : {true, false})
      for (const auto& [alpha, limit] : {std::pair{1.702f, 7.0f}, std::pair{-0.5f, 0.25f}, std::pair{1.702f, INFINITY}}) {
        const uint16_t* bp = with_bias ? bias_p : nullptr;
        ASSERT_EQ(cudaMemset(dgated, 0xa5, gated.size() * 2), cudaSuccess);
        s = set->gemv_swiglu(ids_p, rows_p, pairs, x_p, x_count, bp, alpha, limit, static_cast<uint16_t*>(dgated), nullptr);
        // The CUDA-core stripe kernel (tiles of <= 16 rows) cannot pair the rows of an odd tile
        // height: refused, naming why.
        if (!set->uses_tensor_cores() && view->tile_n % 2 && view->tile_n <= 16) {
          EXPECT_EQ(s.kind(), ErrorKind::kUnsupported) << path << ": " << s.message();
          continue;
        }
        ASSERT_TRUE(s.is_ok()) << path << ": " << s.message();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(gated.data(), dgated, gated.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        ExpertSwigluArgs r;
        r.gate_up = plain.data(), r.bias = with_bias ? bias.data() : nullptr, r.ids = ids.data(), r.pairs = pairs, r.n = n;
        r.bias_rows = uint32_t(experts), r.alpha = alpha, r.limit = limit, r.out = want.data();
        expert_swiglu_reference(r);
        int mismatches = 0;
        for (uint64_t i = 0; i < gated.size() && mismatches < 3; ++i)
          if (gated[i] != want[i] && ++mismatches <= 3)
            ADD_FAILURE() << name_of(GetParam()) << " " << path << (with_bias ? " bias" : " no bias") << " alpha " << alpha << " limit "
                          << limit << ": pair " << i / (n / 2) << " output " << i % (n / 2) << ": got " << std::hex << gated[i] << " want "
                          << want[i];
        for (uint64_t j = 0; j < n / 2; ++j) {  // the pairs with a bad index: NaN
          EXPECT_EQ(gated[1 * (n / 2) + j], 0x7fc0) << path;
          EXPECT_EQ(gated[2 * (n / 2) + j], 0x7fc0) << path;
        }
      }
  }
  for (void* p : {dx, dbias, dids, drows, dplain, dgated}) cudaFree(p);
}

// The grouped expert GEMV with a gated MLP's activation in its launch (ExpertSet::gemv_gated:
// pairs 2j and 2j + 1 are gate and up of row j) against the plain launch's BF16 outputs put
// through the activation's CPU reference (gated_silu_reference, itself held to an FP64 oracle
// in decode_reference_test.cpp), bit for bit. Three launches in a row (the exchange must come
// back to zero: a graph replays the same one), the third with the router's ids written late by
// a producer that lets the GEMV start at once. On the CUDA-core kernel (the plain launch and the
// activation's own), the tensor cores, and for NF4 its declared BF16 table. Bad indices make
// their row NaN; an odd number of pairs is refused.
TEST_P(ExpertCases, GatedIsThePlainGemvThenTheActivationBitForBit) {
  std::mt19937 rng(seed_once() ^ uint32_t(std::hash<std::string>{}(name_of(GetParam()) + " gated")));
  OnDevice d;
  ASSERT_NO_FATAL_FAILURE(build_on_device(GetParam(), rng, d));
  const QuantView* view = &d.view;
  const uint64_t n = view->n, k = view->k, experts = view->rows / n;
  const uint64_t x_count = 3, pairs = 2 * ((experts + 5) / 2);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> x(std::max<uint64_t>(x_count * k, 8));
  for (auto& v : x) v = f32_to_bf16(4 * dist(rng));
  std::vector<int32_t> ids(pairs), rows(pairs);
  for (uint64_t p = 0; p < pairs; ++p) ids[p] = int32_t(rng() % experts), rows[p] = int32_t(rng() % x_count);
  ids[1] = int32_t(experts);   // out of range: row 0's up
  rows[2] = int32_t(x_count);  // out of range: row 1's gate
  void *dx, *dids, *drows, *dplain, *dexchange, *dout, *dstaging;
  const uint64_t words = pairs / 2 * n;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dids, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drows, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dplain, pairs * n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dexchange, words * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, words * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dstaging, pairs * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dids, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dstaging, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(drows, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto* ids_p = static_cast<const int32_t*>(dids);
  const auto* rows_p = static_cast<const int32_t*>(drows);
  const auto* x_p = static_cast<const uint16_t*>(dx);
  auto* exchange_p = static_cast<uint32_t*>(dexchange);
  auto* out_p = static_cast<uint16_t*>(dout);

  for (int pass : {0, 1, 2}) {
    if (pass == 2 && view->format != ViewFormat::kNf4) continue;
    LaunchConfig launch = device_.launch_config();
    launch.variants.gemv_tensor_cores = pass != 0;
    launch.nf4_bf16_table = pass == 2;
    auto set = ExpertSet::create({*view}, device_.ordinal, launch);
    ASSERT_TRUE(set.is_ok()) << set.status().message();
    const std::string path = !set->uses_tensor_cores() ? "cuda cores" : pass == 2 ? "tensor cores, NF4 BF16 table" : "tensor cores";
    ASSERT_EQ(set->gated_exchange(pairs), words);
    ASSERT_EQ(cudaMemset(dexchange, 0, words * 4), cudaSuccess);
    EXPECT_EQ(set->gemv_gated(ids_p, rows_p, pairs - 1, x_p, x_count, exchange_p, out_p, nullptr).kind(), ErrorKind::kInvalidArgument)
        << path << ": an odd number of pairs must be refused";
    EXPECT_EQ(set->gemv_gated(ids_p, rows_p, pairs, x_p, x_count, exchange_p, reinterpret_cast<uint16_t*>(exchange_p) + 2, nullptr).kind(),
              ErrorKind::kInvalidArgument)
        << path << ": an out over the exchange must be refused";
    ASSERT_EQ(cudaMemset(dplain, 0xa5, pairs * n * 2), cudaSuccess);
    Status s = set->gemv(ids_p, rows_p, pairs, x_p, x_count, dplain, DType::kBF16, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    std::vector<uint16_t> plain(pairs * n), want(words);
    ASSERT_EQ(cudaMemcpy(plain.data(), dplain, plain.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    GatedSiluArgs r;
    r.gate = plain.data(), r.up = plain.data() + n, r.rows = pairs / 2, r.n = n, r.gate_stride = r.up_stride = 2 * n, r.out = want.data();
    ASSERT_TRUE(check_gated_silu(r).is_ok());
    gated_silu_reference(r);
    for (int run = 0; run < 3; ++run) {
      ASSERT_EQ(cudaMemset(dout, 0xa5, words * 2), cudaSuccess);
      cudaStream_t stream = nullptr;
      if (run == 2) {
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        ASSERT_EQ(test::write_late(dids, dstaging, pairs * 4, stream), cudaSuccess);
      }
      s = set->gemv_gated(ids_p, rows_p, pairs, x_p, x_count, exchange_p, out_p, stream);
      ASSERT_TRUE(s.is_ok()) << path << ": " << s.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      if (stream) cudaStreamDestroy(stream);
      std::vector<uint16_t> out(words);
      std::vector<uint32_t> left(words);
      ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(left.data(), dexchange, words * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(left, std::vector<uint32_t>(words, 0u)) << path << " run " << run << ": the exchange is not back at zero";
      int mismatches = 0;
      for (uint64_t i = 0; i < out.size() && mismatches < 3; ++i)
        if (out[i] != want[i] && ++mismatches <= 3)
          ADD_FAILURE() << name_of(GetParam()) << " " << path << " run " << run << ": row " << i / n << " output " << i % n << ": got "
                        << std::hex << out[i] << " want " << want[i];
      for (uint64_t j = 0; j < n; ++j) {  // rows 0 and 1 have a pair with a bad index: NaN
        EXPECT_EQ(out[j], 0x7fc0) << path;
        EXPECT_EQ(out[n + j], 0x7fc0) << path;
      }
    }
  }
  for (void* p : {dx, dids, drows, dplain, dexchange, dout, dstaging}) cudaFree(p);
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  const std::vector<std::vector<uint64_t>> shapes = {{1, 32}, {1, 64}, {3, 96}, {16, 256}, {17, 320}, {129, 512}, {64, 4096}, {2, 5, 256}, {4, 33, 128}};
  for (const auto& s : shapes) {
    for (std::string f : {"mxfp4", "nvfp4", "nvfp4-ct", "nf4", "bnb_fp4", "fp8-tensor", "fp8-channel", "fp8-block", "fp8-group", "fp8-bf16"}) {
      if (f == "fp8-group" && s.back() % 48 != 0 && s.back() != 32) {}  // groups may end mid-row: allowed
      cs.push_back({f, s, 0, 0});
    }
    cs.push_back({"mxfp4", s, 1, 32});
    if (s.back() % 64 == 0) cs.push_back({"nf4", s, 8, 64});
    cs.push_back({"fp8-block", s, 4, 48});
  }
  // K not a multiple of the block or the tile.
  cs.push_back({"mxfp4", {5, 33}, 0, 0});
  cs.push_back({"mxfp4", {7, 100}, 0, 0});
  cs.push_back({"fp8-block", {130, 200}, 0, 0});
  cs.push_back({"fp8-channel", {3, 40}, 0, 0});
  cs.push_back({"nf4", {3, 50}, 0, 0});      // flat: blocks cross rows
  cs.push_back({"nf4", {1, 1}, 0, 0});       // flat, one element
  cs.push_back({"nf4", {7, 129}, 0, 0});     // flat, odd element count
  // K a multiple of 16, groups of 24: a 16-element dequant item would need two scales, so
  // the 8-element kernel runs (dequant_words).
  cs.push_back({"fp8-group24", {9, 96}, 0, 0});
  // Tensor-core GEMV: 16-row stripes with 64, 128, 192 and 512-column tiles, K not a multiple
  // of the chunk (64) or the tile, a partial last stripe, NF4 blocks of 128.
  for (std::string f : {"mxfp4", "nf4", "bnb_fp4", "fp8-tensor", "fp8-channel", "fp8-block", "fp8-bf16", "fp8-f16", "fp8-group128",
                        "fp8-block48x192"}) {
    for (uint64_t tk : {64, 128, 192, 512}) cs.push_back({f, {40, 1024}, 16, tk});
  }
  // A stripe's rows in two row blocks, blocks found by division (48 x 192), on a stack of
  // matrices too (each row's scales found from its matrix and row: v51's cursor).
  cs.push_back({"fp8-block48x192", {3, 100, 1000}, 0, 0});
  cs.push_back({"fp8-f16", {2, 48, 640}, 0, 0});
  cs.push_back({"mxfp4", {32, 100}, 0, 0});
  cs.push_back({"mxfp4", {33, 1000}, 0, 0});
  cs.push_back({"fp8-block", {40, 200}, 0, 0});
  cs.push_back({"fp8-channel", {17, 72}, 0, 0});
  cs.push_back({"fp8-tensor", {2, 16, 4104}, 0, 0});
  cs.push_back({"nf4", {33, 192}, 0, 0});
  cs.push_back({"fp8-group128", {20, 300}, 0, 0});
  cs.push_back({"mxfp4", {48, 14336}, 0, 0});
  // Empty tensors: no rows, or no columns (every GEMV output is then +0).
  for (std::string f : {"mxfp4", "nf4", "fp8-channel"}) {
    cs.push_back({f, {0, 64}, 0, 0});
    cs.push_back({f, {3, 0}, 0, 0});
  }
  // Scale regimes.
  for (auto sc : {Scales::kExtreme, Scales::kWithNaN}) {
    cs.push_back({"mxfp4", {32, 256}, 0, 0, sc});
    cs.push_back({"nf4", {32, 256}, 0, 0, sc});
    cs.push_back({"fp8-channel", {32, 256}, 0, 0, sc});
  }
  // Float scales of either sign, zero, subnormal and huge, in every format whose scales are
  // floats, on the tiled and flat layouts, the tensor-core stripes and a stack of experts.
  for (auto sc : {Scales::kSigned, Scales::kSignedHuge}) {
    for (std::string f : {"nf4", "bnb_fp4", "fp8-tensor", "fp8-channel", "fp8-block", "fp8-group", "fp8-group128", "fp8-bf16", "fp8-f16",
                          "fp8-block48x192"}) {
      if (f == "fp8-f16" && sc == Scales::kSignedHuge) continue;  // 10^25.. is past F16's range: infinite scales, another regime
      cs.push_back({f, {129, 512}, 0, 0, sc});
      cs.push_back({f, {40, 1024}, 16, 128, sc});
      cs.push_back({f, {3, 48, 256}, 0, 0, sc});
    }
    cs.push_back({"fp8-block", {130, 200}, 0, 0, sc});
    cs.push_back({"nf4", {7, 129}, 0, 0, sc});
  }
  // NVFP4: K not a multiple of the 16-element block or of the tile, scale regimes (every E4M3
  // byte, NaN among them, and a NaN tensor scale; signed and huge tensor scales), a stack.
  for (std::string f : {"nvfp4", "nvfp4-ct"}) {
    cs.push_back({f, {7, 40}, 0, 0});
    cs.push_back({f, {5, 24}, 0, 0});
    cs.push_back({f, {40, 1024}, 16, 128});
    for (auto sc : {Scales::kExtreme, Scales::kWithNaN, Scales::kSigned, Scales::kSignedHuge}) {
      cs.push_back({f, {32, 256}, 0, 0, sc});
      cs.push_back({f, {3, 48, 256}, 0, 0, sc});
    }
    cs.push_back({f, {1024, 4096}, 0, 0});
  }
  // Large enough to use many blocks and the grid-stride loops.
  cs.push_back({"mxfp4", {1024, 4096}, 0, 0});
  cs.push_back({"nf4", {1024, 4096}, 0, 0});
  // NF4 without double quantization (an FP32 absmax a block) and with blocks of 128: tiled,
  // a stack of experts, the tensor-core stripes and a flat tensor; the FP32 absmax also with
  // scales of either sign (zeros and subnormals among them).
  for (std::string f : {"nf4-fp32-absmax", "nf4-b128"}) {
    cs.push_back({f, {64, 1024}, 0, 0});
    cs.push_back({f, {40, 1024}, 16, 128});
    cs.push_back({f, {4, 32, 512}, 0, 0});
    cs.push_back({f, {5, 100}, 0, 0});  // flat: blocks cross rows
  }
  cs.push_back({"nf4-fp32-absmax", {129, 512}, 0, 0, Scales::kSigned});
  cs.push_back({"nf4-fp32-absmax", {3, 48, 256}, 0, 0, Scales::kSignedHuge});
  cs.push_back({"fp8-block", {1024, 4096}, 0, 0});
  cs.push_back({"mxfp4", {4, 576, 2880}, 0, 0});
  // MXFP4 scales as real weights have them: the warp-uniform one-factor step and the
  // two-factor one in the same matrix (Scales::kRealMxfp4).
  cs.push_back({"mxfp4", {1024, 4096}, 0, 0, Scales::kRealMxfp4});
  cs.push_back({"mxfp4", {4, 576, 2880}, 0, 0, Scales::kRealMxfp4});
  cs.push_back({"mxfp4", {40, 1024}, 16, 128, Scales::kRealMxfp4});
  cs.push_back({"mxfp4", {33, 1000}, 0, 0, Scales::kRealMxfp4});
  // int_group: every code width, groups and one group a row, zero points, act-order
  // permutations, each scale dtype, LLM.int8's post factor; K not a multiple of 8 or of the
  // group; stacks; the scale regimes.
  for (std::string f : {"int4-g32", "int4-g128-zp-perm", "int3-g32-zp-perm-bf16", "int2-g16-zp", "int8-g0-post", "int8-g64-zp-f32",
                        "int4-g0-perm"}) {
    for (const std::vector<uint64_t>& s : std::vector<std::vector<uint64_t>>{{3, 96}, {17, 320}, {129, 512}, {2, 5, 256}, {4, 33, 128}})
      cs.push_back({f, s, 0, 0});
  }
  cs.push_back({"int4-g32-zp", {5, 37}, 0, 0});
  cs.push_back({"int3-g24-perm", {9, 100}, 0, 0});
  cs.push_back({"int8-g0-post", {64, 4096}, 0, 0});
  cs.push_back({"int4-g128-zp-perm", {256, 4096}, 0, 0});
  for (auto sc : {Scales::kExtreme, Scales::kSigned, Scales::kSignedHuge}) {
    cs.push_back({"int4-g32-zp-perm", {40, 256}, 0, 0, sc});
    cs.push_back({"int8-g0-post", {3, 48, 256}, 0, 0, sc});
    cs.push_back({"int3-g32-bf16", {33, 128}, 0, 0, sc});
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(All, KernelCases, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return "case" + std::to_string(info.index); });

// The cases whose descriptor is tiled with at least one row: the ones an expert set can hold
// (flat NF4 has no matrices, an N = 0 stack has no rows to pick).
std::vector<Case> expert_cases() {
  std::vector<Case> out;
  for (const Case& c : all_cases())
    if (layout_of(c).kind == LayoutKind::kTiled && c.shape[c.shape.size() - 2] > 0) out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, ExpertCases, ::testing::ValuesIn(expert_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return "case" + std::to_string(info.index); });

// NVFP4 tensor scales whose block scales leave FP32's normal range (a decoded weight infinite,
// or a rounded subnormal) send the GEMV to the CUDA cores, which decode each weight as the
// reference does: a row whose reference sum is not finite is not finite on the GPU either (the
// tensor-core order of operations, exact weights then the tensor scale, gave a finite sum
// there: run 2026-11-30, seed 25315504). An ordinary scale keeps the tensor cores.
TEST(Nvfp4TensorScales, OutOfRangeScalesTakeTheCudaCores) {
  auto dev = query_device(0);
  if (!dev.is_ok()) GTEST_SKIP() << "no CUDA GPU device here (" << dev.status().message() << "); this runs on the GPU machine";
  std::mt19937 rng(seed_once() ^ 0x5ca1eu);
  for (const float t : {1e37f, 1e-40f, 3e-3f}) {
    for (const bool ct : {false, true}) {
      const float stored = ct ? 1.0f / t : t;  // compressed-tensors divides by its global scale
      if (!std::isfinite(stored)) continue;
      Built b = build(Case{ct ? "nvfp4-ct" : "nvfp4", {32, 256}, 0, 0}, rng);
      std::memcpy(b.comps[Role::kTensorScale].data(), &stored, 4);
      Gpu gpu;
      DevicePointers ptrs{};
      ComponentBytes host{};
      ASSERT_NO_FATAL_FAILURE(upload(b, gpu, ptrs, &host));
      auto view = make_quant_view(b.desc, ptrs);
      ASSERT_TRUE(view.is_ok()) << view.status().message();
      view->nvfp4_mma_safe = nvfp4_tensor_scales_mma_safe(host[int(Role::kTensorScale)], view->nvfp4_divides);
      const bool ordinary = t == 3e-3f;
      EXPECT_EQ(view->nvfp4_mma_safe, ordinary) << t;
      const LaunchConfig launch = dev->launch_config();
      EXPECT_EQ(cuda_gemv_uses_tensor_cores(*view, 1, launch), ordinary && launch.kernel_arch >= 80) << t;
      std::vector<float> ref(view->rows * view->k);
      ASSERT_TRUE(reference_decode(b.desc, host, ref.data()).is_ok());
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<uint16_t> x(view->k);
      for (auto& v : x) v = f32_to_bf16(dist(rng));
      void *dx, *dy;
      ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dy, view->rows * 4), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE(cuda_gemv(*view, static_cast<const uint16_t*>(dx), 1, dy, DType::kF32, nullptr, launch).is_ok());
      std::vector<float> y(view->rows);
      ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(dx);
      cudaFree(dy);
      const CheckResult r = check_gemv_row_sums(ref.data(), x.data(), view->rows, view->k, y.data(), "gemv",
                                                gemv_accumulation(cuda_gemv_uses_tensor_cores(*view, 1, launch), false));
      EXPECT_TRUE(r.ok) << "tensor scale " << t << (ct ? " (divides)" : " (multiplies)") << ": " << r.detail;
    }
  }
}

TEST(KernelRefusal, UnsupportedTileIsRefusedNotMisread) {
  TensorDesc d;
  d.name = "w";
  d.shape = {16, 64};
  d.dtype = DType::kBF16;
  d.format = Format::kFp8E4M3;
  d.params = {{"scale_granularity", "tensor"}, {"scale_dtype", "f32"}, {"scale_shape", {1}}, {"scale_name", "weight_scale"}};
  d.layout = {LayoutKind::kTiled, 16, 8};  // valid in the format, not a multiple of 16 bytes
  DevicePointers ptrs{};
  ptrs[int(Role::kCodes)] = reinterpret_cast<const void*>(16);
  ptrs[int(Role::kScales)] = reinterpret_cast<const void*>(16);
  auto v = make_quant_view(d, ptrs);
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.status().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(v.status().message().find("tile_k 8"), std::string::npos) << v.status().message();
}

}  // namespace
}  // namespace iris
