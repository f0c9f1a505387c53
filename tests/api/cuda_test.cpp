// The CUDA half of the C API on the GPU: iris_cuda_upload of every fixture archive (and of
// requantizations of llama-bf16), then iris_cuda_dequantize bit for bit against the CPU path
// (iris_dequantize) in F32, BF16 and F16, and iris_cuda_gemv at batches 1, 3 and 16 within the
// stated FP32 bound of a double-precision product of the CPU-decoded weights. Skips, saying
// why, where no GPU is visible.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/float_bits.h"
#include "iris/iris.h"
#include "iris/iris_cuda.h"
#include "kernels/decode_ops.h"
#include "kernels/mxfp4_planes.h"
#include "tests/api/capi_fixture.h"
#include "verify/gemv_bound.h"

namespace iris::capi_test {
namespace {

// What a component holds on the device: the archive's bytes, except the codes of an MXFP4
// tensor that the tensor-core GEMV runs, whose 32-bit words uploads put in its bit-plane order
// (iris_cuda.h, iris_cuda_tensor_component; kernels/mxfp4_planes.h, tested against its own
// oracle). On code without BF16 mma they stay as the archive has them.
std::vector<uint8_t> device_bytes_of(const iris_tensor_info& info, const iris_component_info& ci, const iris_cuda_tensor* t) {
  const auto* bytes = static_cast<const uint8_t*>(ci.data);
  std::vector<uint8_t> want(bytes, bytes + ci.size);
  if (info.format != IRIS_FORMAT_MXFP4 || ci.role != IRIS_ROLE_CODES || iris_cuda_gemv_uses_tensor_cores(t, 1) != 1) return want;
  for (size_t at = 0; at + 4 <= want.size(); at += 4) {
    uint32_t w;
    std::memcpy(&w, &want[at], 4);
    w = iris::mxfp4_word_to_planes(w);
    std::memcpy(&want[at], &w, 4);
  }
  return want;
}

struct CudaArchiveCloser {
  void operator()(iris_cuda_archive* a) const { iris_cuda_archive_free(a); }
};
using CudaArchivePtr = std::unique_ptr<iris_cuda_archive, CudaArchiveCloser>;

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

class CApiCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    char msg[256];
    if (iris_cuda_device_check(0, msg, sizeof msg) != IRIS_OK) GTEST_SKIP() << "no usable GPU here (" << msg << "); these run on the GPU machine";
  }
};

CudaArchivePtr upload(const iris_archive* a, const iris_upload_options* o = nullptr) {
  iris_cuda_archive* d = nullptr;
  char msg[512];
  iris_status s = iris_cuda_upload(a, o, &d, msg, sizeof msg);
  EXPECT_EQ(s, IRIS_OK) << msg;
  return CudaArchivePtr(d);
}

struct ArchiveCase {
  std::string fixture, options;
};

class CApiCudaArchives : public CApiCuda, public ::testing::WithParamInterface<ArchiveCase> {};

TEST_P(CApiCudaArchives, UploadDequantAndGemvMatchTheCpu) {
  auto a = open_archive(converted(GetParam().fixture, GetParam().options));
  ASSERT_TRUE(a);
  iris_upload_options o;
  iris_upload_options_init(&o);
  o.verify = 1;
  o.staging_bytes = 1 << 20;  // small buffers: many refills, slices and components across buffer ends
  o.staging_buffers = 3;
  auto d = upload(a.get(), &o);
  ASSERT_TRUE(d);
  ASSERT_EQ(iris_cuda_archive_tensor_count(d.get()), iris_archive_tensor_count(a.get()));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(std::random_device{}());
  int quantized = 0;
  for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
    iris_tensor_info info;
    ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
    const iris_cuda_tensor* t = nullptr;
    ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), info.name, &t, nullptr, 0), IRIS_OK);
    iris_tensor_info dinfo;
    iris_cuda_tensor_info(t, &dinfo);
    EXPECT_EQ(std::memcmp(dinfo.shape, info.shape, sizeof info.shape), 0);
    // Every component's device bytes are the archive's bytes (MXFP4 codes rearranged).
    for (uint32_t c = 0; c < info.n_components; ++c) {
      iris_component_info ci;
      ASSERT_EQ(iris_archive_component(a.get(), i, c, &ci, nullptr, 0), IRIS_OK);
      const void* dp = iris_cuda_tensor_component(t, ci.role);
      ASSERT_NE(dp, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(dp) % 256, 0u);
      std::vector<uint8_t> back(ci.size);
      ASSERT_EQ(cudaMemcpy(back.data(), dp, ci.size, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(back, device_bytes_of(info, ci, t)) << info.name << "/" << iris_role_name(ci.role);
    }
    if (info.format == IRIS_FORMAT_RAW) {
      char msg[256];
      DeviceBuffer out(info.numel * 4);
      EXPECT_EQ(iris_cuda_dequantize(t, IRIS_DTYPE_F32, out.p, info.numel * 4, stream, msg, sizeof msg), IRIS_ERR_UNSUPPORTED) << info.name;
      continue;
    }
    ++quantized;
    struct Out { iris_dtype dtype; uint32_t bytes; };
    std::vector<float> ref(info.numel);
    ASSERT_EQ(iris_dequantize(a.get(), i, IRIS_DTYPE_F32, ref.data(), ref.size() * 4, 0, nullptr, 0), IRIS_OK);
    for (Out o2 : {Out{IRIS_DTYPE_F32, 4}, Out{IRIS_DTYPE_BF16, 2}, Out{IRIS_DTYPE_F16, 2}}) {
      std::vector<uint8_t> cpu(info.numel * o2.bytes), gpu(info.numel * o2.bytes);
      ASSERT_EQ(iris_dequantize(a.get(), i, o2.dtype, cpu.data(), cpu.size(), 0, nullptr, 0), IRIS_OK);
      DeviceBuffer out(gpu.size());
      ASSERT_EQ(cudaMemset(out.p, 0xa5, gpu.size()), cudaSuccess);  // poison: every element must be written
      char msg[512];
      ASSERT_EQ(iris_cuda_dequantize(t, o2.dtype, out.p, gpu.size(), stream, msg, sizeof msg), IRIS_OK) << msg;
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(gpu.data(), out.p, gpu.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (uint64_t e = 0; e < info.numel; ++e)
        ASSERT_EQ(std::memcmp(&gpu[e * o2.bytes], &cpu[e * o2.bytes], o2.bytes), 0)
            << info.name << " " << iris_dtype_name(o2.dtype) << ": first mismatch at element " << e;
    }
    if (info.layout.kind != IRIS_LAYOUT_TILED) continue;
    const uint64_t k = info.numel / info.rows;
    for (int batch : {1, 3, 16}) {
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<uint16_t> x(uint64_t(batch) * k);
      for (auto& v : x) v = f32_to_bf16(dist(rng));
      DeviceBuffer dx(x.size() * 2), dy(uint64_t(batch) * info.rows * 4);
      ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      char msg[512];
      ASSERT_EQ(iris_cuda_gemv(t, static_cast<const uint16_t*>(dx.p), batch, dy.p, IRIS_DTYPE_F32, stream, msg, sizeof msg), IRIS_OK) << msg;
      std::vector<float> y(uint64_t(batch) * info.rows);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      const auto acc = gemv_accumulation(iris_cuda_gemv_uses_tensor_cores(t, batch), false);
      for (int b = 0; b < batch; ++b) {
        CheckResult r = check_gemv_row_sums(ref.data(), x.data() + b * k, info.rows, k, y.data() + b * info.rows, "gemv", acc);
        EXPECT_TRUE(r.ok) << info.name << " batch " << batch << " row-set " << b << ": " << r.detail;
      }
    }
    char msg[256];
    EXPECT_EQ(iris_cuda_gemv(t, nullptr, 17, nullptr, IRIS_DTYPE_F32, stream, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_gemv(t, nullptr, 1, nullptr, IRIS_DTYPE_F16, stream, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  }
  EXPECT_GT(quantized, 0);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CApiCudaArchives,
                         ::testing::Values(ArchiveCase{"gptoss-mxfp4", ""}, ArchiveCase{"llama-nf4-dq", ""},
                                           ArchiveCase{"llama-fp8-block", ""}, ArchiveCase{"llama-bf16", "--quant mxfp4"},
                                           ArchiveCase{"llama-bf16", "--quant nf4"}, ArchiveCase{"llama-bf16", "--quant fp8-channel"},
                                           ArchiveCase{"llama-bf16", "--quant fp8 --tile-n 8 --tile-k 64"}),
                         [](const ::testing::TestParamInfo<ArchiveCase>& info) { return "case" + std::to_string(info.index); });

TEST_F(CApiCuda, SubsetUploadAndErrors) {
  auto a = open_archive(converted("gptoss-mxfp4"));
  ASSERT_TRUE(a);
  const char* names[] = {"model.layers.1.mlp.experts.down_proj", "model.layers.0.mlp.experts.gate_up_proj"};
  iris_upload_options o;
  iris_upload_options_init(&o);
  o.names = names;
  o.n_names = 2;
  auto d = upload(a.get(), &o);
  ASSERT_TRUE(d);
  EXPECT_EQ(iris_cuda_archive_tensor_count(d.get()), 2u);
  const iris_cuda_tensor* t = nullptr;
  char msg[256];
  EXPECT_EQ(iris_cuda_archive_find_tensor(d.get(), names[0], &t, msg, sizeof msg), IRIS_OK);
  EXPECT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.embed_tokens.weight", &t, msg, sizeof msg), IRIS_ERR_NOT_FOUND);
  uint64_t bytes = 0;
  for (const char* n : names) {
    uint64_t i;
    ASSERT_EQ(iris_archive_find_tensor(a.get(), n, &i, nullptr, 0), IRIS_OK);
    iris_tensor_info info;
    ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
    for (uint32_t c = 0; c < info.n_components; ++c) {
      iris_component_info ci;
      ASSERT_EQ(iris_archive_component(a.get(), i, c, &ci, nullptr, 0), IRIS_OK);
      bytes += (ci.size + 255) / 256 * 256;
    }
  }
  EXPECT_EQ(iris_cuda_archive_device_bytes(d.get()), bytes);  // only what was asked for
  const char* bad[] = {"no.such.tensor"};
  o.names = bad;
  o.n_names = 1;
  iris_cuda_archive* none = nullptr;
  EXPECT_EQ(iris_cuda_upload(a.get(), &o, &none, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("no.such.tensor"), std::string::npos) << msg;
  iris_upload_options_init(&o);
  o.device = 999;
  EXPECT_EQ(iris_cuda_upload(a.get(), &o, &none, msg, sizeof msg), IRIS_ERR_NO_DEVICE);
  EXPECT_EQ(iris_cuda_device_check(999, msg, sizeof msg), IRIS_ERR_NO_DEVICE);
}

// iris_cuda_gemv_matrix: each expert of an [E, N, K] stack alone, within the bound of the CPU
// reference rows of that expert; MXFP4 as gpt-oss ships it, and requantized to NF4 and FP8.
// iris_upload_options.nf4_table: the same NF4 archive uploaded with the exact table and with
// the declared BF16 one. Each GEMV is within its own bound of the CPU-decoded weights; the two
// differ (the option reaches the kernel: NF4's values are not BF16s); dequantization stays
// exact; an unknown value and an expert set across the two uploads are refused.
TEST_F(CApiCuda, Nf4Bf16TableIsWithinItsBoundAndChosenPerUpload) {
  auto a = open_archive(converted("llama-bf16", "--quant nf4"));
  ASSERT_TRUE(a);
  iris_upload_options o;
  iris_upload_options_init(&o);
  EXPECT_EQ(o.nf4_table, IRIS_NF4_TABLE_EXACT);
  auto exact = upload(a.get(), &o);
  o.nf4_table = IRIS_NF4_TABLE_BF16;
  auto bf16 = upload(a.get(), &o);
  ASSERT_TRUE(exact && bf16);
  o.nf4_table = 2;
  iris_cuda_archive* bad = nullptr;
  char msg[512];
  EXPECT_EQ(iris_cuda_upload(a.get(), &o, &bad, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(msg).find("nf4_table"), std::string::npos) << msg;

  std::mt19937 rng(std::random_device{}());
  int compared = 0, differing = 0;
  for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
    iris_tensor_info info;
    ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
    if (info.format != IRIS_FORMAT_NF4 || info.layout.kind != IRIS_LAYOUT_TILED) continue;
    const iris_cuda_tensor *te = nullptr, *tb = nullptr;
    ASSERT_EQ(iris_cuda_archive_find_tensor(exact.get(), info.name, &te, nullptr, 0), IRIS_OK);
    ASSERT_EQ(iris_cuda_archive_find_tensor(bf16.get(), info.name, &tb, nullptr, 0), IRIS_OK);
    if (!iris_cuda_gemv_uses_tensor_cores(tb, 1)) continue;  // the CUDA-core kernel has no table mode
    std::vector<float> ref(info.numel);
    ASSERT_EQ(iris_dequantize(a.get(), i, IRIS_DTYPE_F32, ref.data(), ref.size() * 4, 0, nullptr, 0), IRIS_OK);
    // Dequantization does not depend on the option.
    DeviceBuffer dq(info.numel * 4);
    ASSERT_EQ(iris_cuda_dequantize(tb, IRIS_DTYPE_F32, dq.p, info.numel * 4, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<float> got(info.numel);
    ASSERT_EQ(cudaMemcpy(got.data(), dq.p, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(std::memcmp(got.data(), ref.data(), got.size() * 4), 0) << info.name;
    const uint64_t k = info.numel / info.rows;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> x(k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    DeviceBuffer dx(k * 2), dye(info.rows * 4), dyb(info.rows * 4);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), k * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(iris_cuda_gemv(te, static_cast<const uint16_t*>(dx.p), 1, dye.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    ASSERT_EQ(iris_cuda_gemv(tb, static_cast<const uint16_t*>(dx.p), 1, dyb.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<float> ye(info.rows), yb(info.rows);
    ASSERT_EQ(cudaMemcpy(ye.data(), dye.p, ye.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(yb.data(), dyb.p, yb.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    CheckResult r = check_gemv_row_sums(ref.data(), x.data(), info.rows, k, ye.data(), "gemv", GemvAccumulation::kTensorCores);
    EXPECT_TRUE(r.ok) << info.name << " exact table: " << r.detail;
    r = check_gemv_row_sums(ref.data(), x.data(), info.rows, k, yb.data(), "gemv", GemvAccumulation::kTensorCoresBf16Table);
    EXPECT_TRUE(r.ok) << info.name << " BF16 table: " << r.detail;
    ++compared;
    differing += std::memcmp(ye.data(), yb.data(), ye.size() * 4) != 0;
  }
  ASSERT_GT(compared, 0);
  EXPECT_EQ(differing, compared) << "the BF16 table gave the exact table's sums bit for bit: the option did not reach the kernel";

  // An expert set is made of one upload's tensors: one from each is refused.
  iris_tensor_info info;
  const iris_cuda_tensor* mixed[2] = {nullptr, nullptr};
  for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()) && !mixed[0]; ++i) {
    ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
    if (info.format != IRIS_FORMAT_NF4 || info.layout.kind != IRIS_LAYOUT_TILED) continue;
    ASSERT_EQ(iris_cuda_archive_find_tensor(exact.get(), info.name, &mixed[0], nullptr, 0), IRIS_OK);
    ASSERT_EQ(iris_cuda_archive_find_tensor(bf16.get(), info.name, &mixed[1], nullptr, 0), IRIS_OK);
  }
  ASSERT_TRUE(mixed[0] && mixed[1]);
  iris_cuda_experts* set = nullptr;
  EXPECT_EQ(iris_cuda_experts_create(mixed, 2, &set, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("nf4_table"), std::string::npos) << msg;
  EXPECT_EQ(set, nullptr);
}

TEST_F(CApiCuda, GemvOfOneMatrixOfAStack) {
  std::mt19937 rng(std::random_device{}());
  int checked = 0;
  for (const char* options : {"", "--quant nf4", "--quant fp8-block", "--quant fp8-channel"}) {
    auto a = open_archive(converted("gptoss-mxfp4", options));
    ASSERT_TRUE(a);
    auto d = upload(a.get());
    ASSERT_TRUE(d);
    for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
      iris_tensor_info info;
      ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
      if (info.format == IRIS_FORMAT_RAW || info.ndim != 3 || info.layout.kind != IRIS_LAYOUT_TILED) continue;
      const iris_cuda_tensor* t = nullptr;
      ASSERT_EQ(iris_cuda_archive_tensor(d.get(), i, &t, nullptr, 0), IRIS_OK);
      std::vector<float> ref(info.numel);
      ASSERT_EQ(iris_dequantize(a.get(), i, IRIS_DTYPE_F32, ref.data(), ref.size() * 4, 0, nullptr, 0), IRIS_OK);
      const uint64_t e = info.shape[0], n = info.shape[1], k = info.shape[2];
      const int batch = 3;
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<uint16_t> x(batch * k);
      for (auto& v : x) v = f32_to_bf16(dist(rng));
      DeviceBuffer dx(x.size() * 2), dy(batch * n * 4);
      ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      char msg[512];
      for (uint64_t m = 0; m < e; ++m) {
        ASSERT_EQ(cudaMemset(dy.p, 0xff, batch * n * 4), cudaSuccess);
        ASSERT_EQ(iris_cuda_gemv_matrix(t, m, static_cast<const uint16_t*>(dx.p), batch, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg), IRIS_OK) << msg;
        std::vector<float> y(batch * n);
        ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        const auto acc = gemv_accumulation(iris_cuda_gemv_uses_tensor_cores(t, batch), false);
        for (int b = 0; b < batch; ++b) {
          CheckResult r = check_gemv_row_sums(ref.data() + m * n * k, x.data() + b * k, n, k, y.data() + b * n, "gemv_matrix", acc);
          EXPECT_TRUE(r.ok) << info.name << " " << options << " expert " << m << " row-set " << b << ": " << r.detail;
        }
      }
      EXPECT_EQ(iris_cuda_gemv_matrix(t, e, static_cast<const uint16_t*>(dx.p), 1, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg),
                IRIS_ERR_INVALID_ARGUMENT);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16);  // 2 layers x gate_up/down x 4 archives
}

// A fixture converted with `options`, opened and uploaded, and the expert set of its stack
// `name` (freed with it).
struct UploadedExperts {
  ArchivePtr archive;
  CudaArchivePtr device;
  iris_cuda_experts* set = nullptr;
  ~UploadedExperts() { iris_cuda_experts_free(set); }
};

std::unique_ptr<UploadedExperts> uploaded_experts(const std::string& fixture, const std::string& options, const char* name) {
  auto u = std::make_unique<UploadedExperts>();
  u->archive = open_archive(converted(fixture, options));
  EXPECT_TRUE(u->archive);
  if (!u->archive) return nullptr;
  u->device = upload(u->archive.get());
  EXPECT_TRUE(u->device);
  if (!u->device) return nullptr;
  const iris_cuda_tensor* t = nullptr;
  char msg[512];
  EXPECT_EQ(iris_cuda_archive_find_tensor(u->device.get(), name, &t, msg, sizeof msg), IRIS_OK) << msg;
  if (!t) return nullptr;
  EXPECT_EQ(iris_cuda_experts_create(&t, 1, &u->set, msg, sizeof msg), IRIS_OK) << msg;
  return u->set ? std::move(u) : nullptr;
}

// iris_cuda_experts_dequantize: the experts a router picked (repeats included), dequantized on
// the GPU from device ids, equal bit for bit to the CPU reference's dequant of the same matrices
// (iris_dequantize of the whole stack), in F32 and BF16; a bad index gives its matrix NaN; other
// formats, short buffers and NULLs are refused with a message.
TEST_F(CApiCuda, PickedExpertsDequantizeAsTheCpuDoes) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  char msg[512];
  for (const char* name : {"model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj"}) {
    SCOPED_TRACE(name);
    auto u = uploaded_experts("gptoss-mxfp4", "", name);
    ASSERT_TRUE(u);
    iris_archive* a = u->archive.get();
    iris_cuda_experts* set = u->set;
    uint64_t index = 0;
    ASSERT_EQ(iris_archive_find_tensor(a, name, &index, msg, sizeof msg), IRIS_OK) << msg;
    iris_tensor_info info;
    ASSERT_EQ(iris_archive_tensor_info(a, index, &info, nullptr, 0), IRIS_OK);
    ASSERT_EQ(info.format, IRIS_FORMAT_MXFP4);
    std::vector<float> ref(info.numel);
    ASSERT_EQ(iris_dequantize(a, index, IRIS_DTYPE_F32, ref.data(), ref.size() * 4, 0, msg, sizeof msg), IRIS_OK) << msg;
    const uint64_t experts = iris_cuda_experts_count(set), n = iris_cuda_experts_n(set), k = iris_cuda_experts_k(set), mat = n * k;
    const uint64_t pairs = 5;
    std::vector<int32_t> ids(pairs);
    for (auto& id : ids) id = int32_t(rng() % experts);
    ids[1] = ids[4];                     // a repeat
    ids[2] = int32_t(experts);           // a bad index: its matrix is NaN
    const uint64_t ws_bytes = iris_cuda_experts_dequantize_workspace(set, pairs);
    ASSERT_GT(ws_bytes, 0u);
    DeviceBuffer dids(pairs * 4), dws(ws_bytes), dout(pairs * mat * 4);
    ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    auto ids_p = static_cast<const int32_t*>(dids.p);
    ASSERT_EQ(cudaMemset(dout.p, 0x5a, pairs * mat * 4), cudaSuccess);
    ASSERT_EQ(iris_cuda_experts_dequantize(set, ids_p, pairs, dws.p, ws_bytes, IRIS_DTYPE_F32, dout.p, pairs * mat * 4, nullptr, msg, sizeof msg),
              IRIS_OK) << msg;
    std::vector<float> got(pairs * mat);
    ASSERT_EQ(cudaMemcpy(got.data(), dout.p, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<uint16_t> got16(pairs * mat);
    ASSERT_EQ(iris_cuda_experts_dequantize(set, ids_p, pairs, dws.p, ws_bytes, IRIS_DTYPE_BF16, dout.p, pairs * mat * 2, nullptr, msg, sizeof msg),
              IRIS_OK) << msg;
    ASSERT_EQ(cudaMemcpy(got16.data(), dout.p, got16.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (uint64_t p = 0; p < pairs; ++p) {
      uint64_t wrong = 0, nan = 0;
      for (uint64_t i = 0; i < mat; ++i) {
        const float g = got[p * mat + i];
        if (ids[p] >= int32_t(experts)) {
          nan += std::isnan(g) && std::isnan(bf16_to_f32(got16[p * mat + i]));
          continue;
        }
        const float want = ref[uint64_t(ids[p]) * mat + i];
        const uint16_t g16 = got16[p * mat + i];
        if (std::isnan(want)) {
          wrong += !std::isnan(g) || !std::isnan(bf16_to_f32(g16));
          continue;
        }
        wrong += std::memcmp(&g, &want, 4) != 0 || g16 != f32_to_bf16(want);
      }
      if (ids[p] >= int32_t(experts)) EXPECT_EQ(nan, mat) << "pair " << p << " (bad index)";
      else EXPECT_EQ(wrong, 0u) << "pair " << p << " (expert " << ids[p] << ")";
    }
    EXPECT_EQ(iris_cuda_experts_dequantize(set, ids_p, pairs, dws.p, ws_bytes - 1, IRIS_DTYPE_F32, dout.p, pairs * mat * 4, nullptr, msg, sizeof msg),
              IRIS_ERR_BUFFER_TOO_SMALL);
    EXPECT_NE(std::string(msg).find("workspace"), std::string::npos) << msg;
    EXPECT_EQ(iris_cuda_experts_dequantize(set, ids_p, pairs, dws.p, ws_bytes, IRIS_DTYPE_F32, dout.p, pairs * mat * 4 - 1, nullptr, msg, sizeof msg),
              IRIS_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(iris_cuda_experts_dequantize(set, ids_p, pairs, dws.p, ws_bytes, IRIS_DTYPE_U8, dout.p, pairs * mat * 4, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_experts_dequantize(nullptr, ids_p, pairs, dws.p, ws_bytes, IRIS_DTYPE_F32, dout.p, pairs * mat * 4, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_experts_dequantize_workspace(nullptr, pairs), 0u);
    // More pairs than one call takes: refused before anything is read (sizes stated as ample).
    EXPECT_EQ(iris_cuda_experts_dequantize(set, ids_p, 70000, dws.p, SIZE_MAX, IRIS_DTYPE_F32, dout.p, SIZE_MAX, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("pairs"), std::string::npos) << msg;
  }
  // Another format: refused by name, and no workspace size.
  auto u = uploaded_experts("gptoss-mxfp4", "--quant nf4", "model.layers.0.mlp.experts.gate_up_proj");
  ASSERT_TRUE(u);
  iris_cuda_experts* set = u->set;
  EXPECT_EQ(iris_cuda_experts_dequantize_workspace(set, 4), 0u);
  DeviceBuffer dids(16), dout(16);
  // Unsupported before any buffer is sized (these are far too small).
  EXPECT_EQ(iris_cuda_experts_dequantize(set, static_cast<const int32_t*>(dids.p), 4, dout.p, 16, IRIS_DTYPE_F32, dout.p, 16, nullptr, msg, sizeof msg),
            IRIS_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(msg).find("MXFP4"), std::string::npos) << msg;
}

// iris_cuda_gemv_experts_swiglu: gpt-oss's gate_up stack with its own bias, as shipped (MXFP4)
// and requantized, equals the plain BF16 launch put through the activation's CPU reference
// (kernels/decode_reference.cpp, held to an FP64 oracle in decode_reference_tests) bit for bit,
// with and without the bias; bad indices give NaNs; bad arguments are refused with a message.
TEST_F(CApiCuda, ExpertGemvWithSwigluIsThePlainGemvThenTheActivation) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  char msg[512];
  for (const char* options : {"", "--quant nf4", "--quant fp8-block"}) {
    SCOPED_TRACE(std::string("gptoss-mxfp4 ") + options);
    auto u = uploaded_experts("gptoss-mxfp4", options, "model.layers.0.mlp.experts.gate_up_proj");
    ASSERT_TRUE(u);
    iris_archive* a = u->archive.get();
    iris_cuda_experts* set = u->set;
    const uint64_t experts = iris_cuda_experts_count(set), n = iris_cuda_experts_n(set), k = iris_cuda_experts_k(set);
    ASSERT_EQ(n % 2, 0u);
    uint64_t bias_index = 0;
    ASSERT_EQ(iris_archive_find_tensor(a, "model.layers.0.mlp.experts.gate_up_proj_bias", &bias_index, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<uint16_t> bias(experts * n);
    ASSERT_EQ(iris_dequantize(a, bias_index, IRIS_DTYPE_BF16, bias.data(), bias.size() * 2, 0, msg, sizeof msg), IRIS_OK) << msg;
    const uint64_t tokens = 2, pairs = 4 * tokens;
    std::vector<uint16_t> x(tokens * k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    std::vector<int32_t> ids(pairs), rows(pairs);
    for (uint64_t p = 0; p < pairs; ++p) ids[p] = int32_t(rng() % experts), rows[p] = int32_t(p / 4);
    ids[3] = -1;  // a bad index: that pair's outputs are NaN
    DeviceBuffer dx(x.size() * 2), dids(pairs * 4), drows(pairs * 4), dbias(bias.size() * 2), dplain(pairs * n * 2), dgated(pairs * n);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(drows.p, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dbias.p, bias.data(), bias.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    auto ids_p = static_cast<const int32_t*>(dids.p), rows_p = static_cast<const int32_t*>(drows.p);
    auto x_p = static_cast<const uint16_t*>(dx.p);
    auto bias_p = static_cast<const uint16_t*>(dbias.p);
    auto gated_p = static_cast<uint16_t*>(dgated.p);
    ASSERT_EQ(iris_cuda_gemv_experts(set, ids_p, rows_p, pairs, x_p, tokens, dplain.p, IRIS_DTYPE_BF16, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<uint16_t> plain(pairs * n), gated(pairs * n / 2), want(pairs * n / 2);
    ASSERT_EQ(cudaMemcpy(plain.data(), dplain.p, plain.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (const bool with_bias : {true, false}) {
      ASSERT_EQ(cudaMemset(dgated.p, 0xa5, pairs * n), cudaSuccess);
      ASSERT_EQ(iris_cuda_gemv_experts_swiglu(set, ids_p, rows_p, pairs, x_p, tokens, with_bias ? bias_p : nullptr, 1.702f, 7.0f, gated_p,
                                              nullptr, msg, sizeof msg), IRIS_OK) << msg;
      ASSERT_EQ(cudaMemcpy(gated.data(), dgated.p, gated.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      iris::ExpertSwigluArgs r;
      r.gate_up = plain.data(), r.bias = with_bias ? bias.data() : nullptr, r.ids = ids.data(), r.pairs = pairs, r.n = n;
      r.bias_rows = uint32_t(experts), r.alpha = 1.702f, r.limit = 7.0f, r.out = want.data();
      iris::expert_swiglu_reference(r);
      EXPECT_EQ(gated, want) << (with_bias ? "with" : "without") << " the bias";
      for (uint64_t j = 0; j < n / 2; ++j) EXPECT_EQ(gated[3 * (n / 2) + j], 0x7fc0) << "the pair with a bad index, output " << j;
    }
    EXPECT_EQ(iris_cuda_gemv_experts_swiglu(set, ids_p, rows_p, pairs, x_p, tokens, bias_p, NAN, 7.0f, gated_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("alpha"), std::string::npos) << msg;
    EXPECT_EQ(iris_cuda_gemv_experts_swiglu(set, ids_p, rows_p, pairs, x_p, tokens, bias_p, 1.702f, -1.0f, gated_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("limit"), std::string::npos) << msg;
    EXPECT_EQ(iris_cuda_gemv_experts_swiglu(nullptr, ids_p, rows_p, pairs, x_p, tokens, bias_p, 1.702f, 7.0f, gated_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_gemv_experts_swiglu(set, ids_p, rows_p, pairs, x_p, tokens, bias_p, 1.702f, 7.0f, nullptr, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
  }
}

// iris_cuda_gemv_experts_gated: a Llama's gate and up projections as pairs 0 and 1 of one set
// (created by rows, as iris.models groups them), in three formats, equal bit for bit to the
// plain BF16 launch put through the activation's CPU reference (gated_silu_reference, held to
// an FP64 oracle in decode_reference_tests), three calls in a row with the exchange left zero
// after each; a bad index gives its row NaN; bad arguments are refused with a message.
TEST_F(CApiCuda, ExpertGemvWithTheGatedActivationIsThePlainGemvThenTheActivation) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  char msg[512];
  for (const char* options : {"--quant mxfp4", "--quant nf4", "--quant fp8-block"}) {
    SCOPED_TRACE(std::string("llama-bf16 ") + options);
    auto a = open_archive(converted("llama-bf16", options));
    ASSERT_TRUE(a);
    auto d = upload(a.get());
    ASSERT_TRUE(d);
    const iris_cuda_tensor* parts[2] = {nullptr, nullptr};
    ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.layers.0.mlp.gate_proj.weight", &parts[0], msg, sizeof msg), IRIS_OK) << msg;
    ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.layers.0.mlp.up_proj.weight", &parts[1], msg, sizeof msg), IRIS_OK) << msg;
    iris_cuda_experts* set = nullptr;
    uint64_t height = 0;
    {
      iris_tensor_info info{};
      uint64_t index = 0;
      ASSERT_EQ(iris_archive_find_tensor(a.get(), "model.layers.0.mlp.gate_proj.weight", &index, msg, sizeof msg), IRIS_OK) << msg;
      ASSERT_EQ(iris_archive_tensor_info(a.get(), index, &info, nullptr, 0), IRIS_OK);
      height = info.shape[0];
    }
    ASSERT_EQ(iris_cuda_experts_create_rows(parts, 2, height, &set, msg, sizeof msg), IRIS_OK) << msg;
    const uint64_t experts = iris_cuda_experts_count(set), n = iris_cuda_experts_n(set), k = iris_cuda_experts_k(set);
    ASSERT_EQ(experts, 2u);
    ASSERT_EQ(n, height);
    // Two rows of activations: pairs (0, 1) on x row 0 and (0, 1) on row 1, then a bad pair.
    const uint64_t tokens = 2, pairs = 6;
    std::vector<uint16_t> x(tokens * k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    std::vector<int32_t> ids = {0, 1, 0, 1, 0, 2}, rows = {0, 0, 1, 1, 0, 0};  // id 2: out of range, row 2's up
    const uint64_t words = iris_cuda_experts_gated_exchange(set, pairs);
    ASSERT_EQ(words, pairs / 2 * n);
    DeviceBuffer dx(x.size() * 2), dids(pairs * 4), drows(pairs * 4), dplain(pairs * n * 2), dexchange(words * 4), dout(pairs / 2 * n * 2);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(drows.p, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dexchange.p, 0, words * 4), cudaSuccess);
    auto ids_p = static_cast<const int32_t*>(dids.p), rows_p = static_cast<const int32_t*>(drows.p);
    auto x_p = static_cast<const uint16_t*>(dx.p);
    auto exchange_p = static_cast<uint32_t*>(dexchange.p);
    auto out_p = static_cast<uint16_t*>(dout.p);
    ASSERT_EQ(iris_cuda_gemv_experts(set, ids_p, rows_p, pairs, x_p, tokens, dplain.p, IRIS_DTYPE_BF16, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<uint16_t> plain(pairs * n), want(pairs / 2 * n), out(pairs / 2 * n);
    ASSERT_EQ(cudaMemcpy(plain.data(), dplain.p, plain.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    iris::GatedSiluArgs r;
    r.gate = plain.data(), r.up = plain.data() + n, r.rows = pairs / 2, r.n = n, r.gate_stride = r.up_stride = 2 * n, r.out = want.data();
    iris::gated_silu_reference(r);
    for (int call = 0; call < 3; ++call) {
      ASSERT_EQ(cudaMemset(dout.p, 0xa5, out.size() * 2), cudaSuccess);
      ASSERT_EQ(iris_cuda_gemv_experts_gated(set, ids_p, rows_p, pairs, x_p, tokens, exchange_p, out_p, nullptr, msg, sizeof msg), IRIS_OK)
          << msg;
      ASSERT_EQ(cudaMemcpy(out.data(), dout.p, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(out, want) << "call " << call;
      std::vector<uint32_t> left(words);
      ASSERT_EQ(cudaMemcpy(left.data(), dexchange.p, words * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(left, std::vector<uint32_t>(words, 0u)) << "call " << call << ": the exchange is not back at zero";
      for (uint64_t j = 0; j < n; ++j) EXPECT_EQ(out[2 * n + j], 0x7fc0) << "the row with a bad index, output " << j;
    }
    {
      // What iris_cuda_experts_gated_in_launch says is what the call launches: captured in a
      // graph, one kernel node where it says 1; the plain launch and the activation's (which
      // leaves the exchange at zero) where it says 0.
      const int in_launch = iris_cuda_experts_gated_in_launch(set);
      cudaStream_t st = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      const iris_status captured = iris_cuda_gemv_experts_gated(set, ids_p, rows_p, pairs, x_p, tokens, exchange_p, out_p, st, msg, sizeof msg);
      ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
      ASSERT_EQ(captured, IRIS_OK) << msg;
      size_t count = 0;
      ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
      std::vector<cudaGraphNode_t> nodes(count);
      ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
      int kernels = 0, others = 0;
      for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type{};
        ASSERT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
        (type == cudaGraphNodeTypeKernel ? kernels : others) += 1;
      }
      EXPECT_EQ(kernels, in_launch ? 1 : 2);
      EXPECT_EQ(others, 0);
      // MXFP4's store costs its kernel no registers (run v66: 56 with it and without), so its
      // launch takes the activation wherever it runs on the tensor cores.
      if (std::string(options) == "--quant mxfp4" && iris_cuda_experts_use_tensor_cores(set)) {
        EXPECT_EQ(in_launch, 1);
      }
      if (!iris_cuda_experts_use_tensor_cores(set)) {
        EXPECT_EQ(in_launch, 0);
      }
      ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
      ASSERT_EQ(cudaStreamDestroy(st), cudaSuccess);
    }
    EXPECT_EQ(iris_cuda_experts_gated_in_launch(nullptr), 0);
    EXPECT_EQ(iris_cuda_gemv_experts_gated(set, ids_p, rows_p, pairs - 1, x_p, tokens, exchange_p, out_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("two by two"), std::string::npos) << msg;
    EXPECT_EQ(iris_cuda_gemv_experts_gated(set, ids_p, rows_p, pairs, x_p, tokens, nullptr, out_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_gemv_experts_gated(set, ids_p, rows_p, pairs, x_p, tokens, exchange_p, reinterpret_cast<uint16_t*>(exchange_p), nullptr,
                                           msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("overlaps"), std::string::npos) << msg;
    EXPECT_EQ(iris_cuda_gemv_experts_gated(nullptr, ids_p, rows_p, pairs, x_p, tokens, exchange_p, out_p, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_experts_gated_exchange(nullptr, 2), 0u);
    iris_cuda_experts_free(set);
  }
}

// iris_cuda_gemv_experts, the grouped expert GEMV: random (expert, token) pairs over each
// [E, N, K] stack of gpt-oss (MXFP4 as shipped, and requantized), and over separate [N, K]
// tensors of the same geometry (the two layers' projections of a Llama, as Mixtral's
// per-expert weights are), each output within the FP32 bound of the CPU reference rows of
// its expert, and over row blocks of tensors of one K (a Llama layer's q cut into k's height,
// then k and v: iris_cuda_experts_create_rows). Bad arguments are refused with a message; bad
// indices give NaN rows.
TEST_F(CApiCuda, GroupedExpertGemvMatchesTheCpu) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  char msg[512];
  struct SetCase {
    std::string fixture, options;
    std::vector<std::string> names;  // one stack, or separate tensors
    uint64_t rows = 0;               // > 0: row blocks of this height (iris_cuda_experts_create_rows)
  };
  std::vector<SetCase> cases;
  for (const char* options : {"", "--quant nf4", "--quant fp8-block", "--quant fp8-channel"})
    for (const char* t : {"model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj"}) cases.push_back({"gptoss-mxfp4", options, {t}});
  for (const char* options : {"--quant nf4", "--quant mxfp4", "--quant fp8-block"})
    for (const char* p : {"gate_proj", "down_proj"})
      cases.push_back({"llama-bf16", options, {std::string("model.layers.0.mlp.") + p + ".weight", std::string("model.layers.1.mlp.") + p + ".weight"}});
  for (const char* options : {"--quant nf4", "--quant mxfp4", "--quant fp8-block", "--quant fp8-channel"})
    cases.push_back({"llama-bf16", options,
                     {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight"},
                     128});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fixture + " " + c.options + " " + c.names[0]);
    auto a = open_archive(converted(c.fixture, c.options));
    ASSERT_TRUE(a);
    auto d = upload(a.get());
    ASSERT_TRUE(d);
    std::vector<const iris_cuda_tensor*> tensors;
    std::vector<std::vector<float>> refs;  // CPU reference of each tensor
    for (const auto& name : c.names) {
      const iris_cuda_tensor* t = nullptr;
      ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), name.c_str(), &t, msg, sizeof msg), IRIS_OK) << msg;
      tensors.push_back(t);
      iris_tensor_info info;
      iris_cuda_tensor_info(t, &info);
      uint64_t index = 0;
      ASSERT_EQ(iris_archive_find_tensor(a.get(), name.c_str(), &index, msg, sizeof msg), IRIS_OK) << msg;
      refs.emplace_back(info.numel);
      ASSERT_EQ(iris_dequantize(a.get(), index, IRIS_DTYPE_F32, refs.back().data(), info.numel * 4, 0, msg, sizeof msg), IRIS_OK) << msg;
    }
    iris_cuda_experts* set = nullptr;
    if (c.rows)
      ASSERT_EQ(iris_cuda_experts_create_rows(tensors.data(), tensors.size(), c.rows, &set, msg, sizeof msg), IRIS_OK) << msg;
    else
      ASSERT_EQ(iris_cuda_experts_create(tensors.data(), tensors.size(), &set, msg, sizeof msg), IRIS_OK) << msg;
    const uint64_t experts = iris_cuda_experts_count(set), n = iris_cuda_experts_n(set), k = iris_cuda_experts_k(set);
    // The CPU reference rows of each expert: the stack's matrices, the tensors, or their row blocks.
    std::vector<const float*> expert_ref;
    for (const auto& r : refs)
      for (uint64_t off = 0; off < r.size(); off += n * k) expert_ref.push_back(r.data() + off);
    if (c.rows) {
      EXPECT_EQ(n, c.rows);
      EXPECT_EQ(expert_ref.size(), experts);
    } else {
      EXPECT_EQ(experts, tensors.size() == 1 ? refs[0].size() / (n * k) : tensors.size());
    }
    const uint64_t tokens = 3, pairs = 4 * tokens;  // top-4 of 3 tokens, repeats allowed
    std::vector<uint16_t> x(tokens * k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    std::vector<int32_t> ids(pairs), rows(pairs);
    for (uint64_t p = 0; p < pairs; ++p) {
      ids[p] = int32_t(rng() % experts);
      rows[p] = int32_t(p / 4);
    }
    DeviceBuffer dx(x.size() * 2), dids(pairs * 4), drows(pairs * 4), dy(pairs * n * 4);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(drows.p, rows.data(), pairs * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy.p, 0xff, pairs * n * 4), cudaSuccess);
    auto ids_p = static_cast<const int32_t*>(dids.p), rows_p = static_cast<const int32_t*>(drows.p);
    auto x_p = static_cast<const uint16_t*>(dx.p);
    ASSERT_EQ(iris_cuda_gemv_experts(set, ids_p, rows_p, pairs, x_p, tokens, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    const auto acc = gemv_accumulation(iris_cuda_experts_use_tensor_cores(set), false);
    std::vector<float> y(pairs * n);
    ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (uint64_t p = 0; p < pairs; ++p) {
      CheckResult r = check_gemv_row_sums(expert_ref[ids[p]], x.data() + rows[p] * k, n, k, y.data() + p * n, "gemv_experts", acc);
      EXPECT_TRUE(r.ok) << "pair " << p << " (expert " << ids[p] << ", token " << rows[p] << "): " << r.detail;
    }
    // x_rows NULL: pair p multiplies row p of x. The same pairs with their rows gathered give
    // the same bits.
    std::vector<uint16_t> gathered(pairs * k);
    for (uint64_t p = 0; p < pairs; ++p) std::memcpy(&gathered[p * k], &x[rows[p] * k], k * 2);
    DeviceBuffer dg(gathered.size() * 2), dy_null(pairs * n * 4);
    ASSERT_EQ(cudaMemcpy(dg.p, gathered.data(), gathered.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(iris_cuda_gemv_experts(set, ids_p, nullptr, pairs, static_cast<const uint16_t*>(dg.p), pairs, dy_null.p, IRIS_DTYPE_F32, nullptr,
                                     msg, sizeof msg), IRIS_OK) << msg;
    std::vector<float> y_null(pairs * n);
    ASSERT_EQ(cudaMemcpy(y_null.data(), dy_null.p, y_null.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(y_null.data(), y.data(), y.size() * 4), 0) << "x_rows NULL differs from the gathered rows";
    // A bad expert index gives a NaN row, nothing else changes; NULL ids and a misaligned x are refused.
    ids[0] = int32_t(experts);
    ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(iris_cuda_gemv_experts(set, ids_p, rows_p, pairs, x_p, tokens, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg), IRIS_OK) << msg;
    std::vector<float> y2(pairs * n);
    ASSERT_EQ(cudaMemcpy(y2.data(), dy.p, y2.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (uint64_t r = 0; r < n; ++r) EXPECT_TRUE(std::isnan(y2[r])) << "output " << r << " of the pair with a bad expert";
    EXPECT_EQ(std::memcmp(y2.data() + n, y.data() + n, (pairs - 1) * n * 4), 0);
    EXPECT_EQ(iris_cuda_gemv_experts(set, nullptr, rows_p, pairs, x_p, tokens, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(iris_cuda_gemv_experts(set, ids_p, rows_p, pairs, x_p + 1, tokens, dy.p, IRIS_DTYPE_F32, nullptr, msg, sizeof msg),
              IRIS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(msg).find("aligned"), std::string::npos) << msg;
    iris_cuda_experts_free(set);
  }
  // Tensors of different geometry do not make a set.
  auto a = open_archive(converted("llama-bf16", "--quant nf4"));
  ASSERT_TRUE(a);
  auto d = upload(a.get());
  const iris_cuda_tensor* mixed[2] = {nullptr, nullptr};
  ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.layers.0.mlp.gate_proj.weight", &mixed[0], msg, sizeof msg), IRIS_OK) << msg;
  ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.layers.0.mlp.down_proj.weight", &mixed[1], msg, sizeof msg), IRIS_OK) << msg;
  iris_cuda_experts* set = nullptr;
  EXPECT_EQ(iris_cuda_experts_create(mixed, 2, &set, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("differs from tensor 0"), std::string::npos) << msg;
  EXPECT_EQ(set, nullptr);
  // Row blocks: the height must divide N and be whole stripes; the blocks must share K.
  const iris_cuda_tensor* q = nullptr;
  ASSERT_EQ(iris_cuda_archive_find_tensor(d.get(), "model.layers.0.self_attn.q_proj.weight", &q, msg, sizeof msg), IRIS_OK) << msg;
  for (uint64_t rows : {0, 96, 8, 512}) {
    EXPECT_EQ(iris_cuda_experts_create_rows(&q, 1, rows, &set, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT) << rows;
    EXPECT_NE(std::string(msg).find("q_proj"), std::string::npos) << msg;
    EXPECT_EQ(set, nullptr);
  }
  const iris_cuda_tensor* q_and_down[2] = {q, mixed[1]};
  EXPECT_EQ(iris_cuda_experts_create_rows(q_and_down, 2, 128, &set, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("differs from tensor 0"), std::string::npos) << msg;
  EXPECT_EQ(set, nullptr);
}

// One uploader, several archives: the device copies equal the files' bytes each time (MXFP4
// codes rearranged).
TEST_F(CApiCuda, ReusedUploaderUploadsSeveralArchives) {
  iris_upload_options o;
  iris_upload_options_init(&o);
  o.staging_bytes = 1 << 20;
  o.staging_buffers = 2;
  iris_cuda_uploader* u = nullptr;
  char msg[512];
  ASSERT_EQ(iris_cuda_uploader_create(&o, &u, msg, sizeof msg), IRIS_OK) << msg;
  // Whether the tensor cores run the tiled (16-row) FP8 tensors and the MXFP4 ones: MXFP4's
  // codes are rearranged exactly where they do, and its answer depends on that rearrangement,
  // so FP8's (which depends on the device and build alone) is the independent check that an
  // upload rearranged them wherever it could.
  int fp8_tensor_cores = -1;
  std::vector<int> mxfp4_tensor_cores;
  for (const char* fixture : {"gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block", "gptoss-mxfp4"}) {
    auto a = open_archive(converted(fixture));
    ASSERT_TRUE(a);
    iris_cuda_archive* d = nullptr;
    o.verify = 1;
    ASSERT_EQ(iris_cuda_uploader_upload(u, a.get(), &o, &d, msg, sizeof msg), IRIS_OK) << msg;
    CudaArchivePtr owned(d);
    for (uint64_t i = 0; i < iris_archive_tensor_count(a.get()); ++i) {
      iris_component_info ci;
      ASSERT_EQ(iris_archive_component(a.get(), i, 0, &ci, nullptr, 0), IRIS_OK);
      const iris_cuda_tensor* t = nullptr;
      ASSERT_EQ(iris_cuda_archive_tensor(d, i, &t, nullptr, 0), IRIS_OK);
      std::vector<uint8_t> back(ci.size);
      ASSERT_EQ(cudaMemcpy(back.data(), iris_cuda_tensor_component(t, ci.role), ci.size, cudaMemcpyDeviceToHost), cudaSuccess);
      iris_tensor_info info;
      ASSERT_EQ(iris_archive_tensor_info(a.get(), i, &info, nullptr, 0), IRIS_OK);
      ASSERT_EQ(back, device_bytes_of(info, ci, t)) << fixture << " tensor " << i;
      if (info.layout.kind == IRIS_LAYOUT_TILED && info.layout.tile_n == 16) {
        if (info.format == IRIS_FORMAT_FP8_E4M3) fp8_tensor_cores = iris_cuda_gemv_uses_tensor_cores(t, 1);
        if (info.format == IRIS_FORMAT_MXFP4) mxfp4_tensor_cores.push_back(iris_cuda_gemv_uses_tensor_cores(t, 1));
      }
    }
  }
  ASSERT_NE(fp8_tensor_cores, -1) << "no tiled FP8 tensor among the fixtures";
  ASSERT_FALSE(mxfp4_tensor_cores.empty()) << "no tiled MXFP4 tensor among the fixtures";
  for (int m : mxfp4_tensor_cores) EXPECT_EQ(m, fp8_tensor_cores) << "an MXFP4 tensor left in nibble order where the tensor cores run FP8";
  EXPECT_EQ(iris_cuda_uploader_upload(u, nullptr, &o, nullptr, msg, sizeof msg), IRIS_ERR_INVALID_ARGUMENT);
  iris_cuda_uploader_free(u);
}

TEST_F(CApiCuda, DamagedArchiveFailsVerifiedUpload) {
  std::string b = testing_files::read_all(converted("llama-fp8-block"));
  auto a0 = open_archive(converted("llama-fp8-block"));
  uint64_t i;
  ASSERT_EQ(iris_archive_find_tensor(a0.get(), "model.layers.0.mlp.down_proj.weight", &i, nullptr, 0), IRIS_OK);
  iris_component_info ci;
  ASSERT_EQ(iris_archive_find_component(a0.get(), i, IRIS_ROLE_CODES, &ci, nullptr, 0), IRIS_OK);
  b[ci.file_offset + 7] ^= 1;
  testing_files::TempDir dir;
  testing_files::write_bytes(dir / "damaged.iris", b);
  auto a = open_archive(dir / "damaged.iris");
  ASSERT_TRUE(a);
  iris_upload_options o;
  iris_upload_options_init(&o);
  o.verify = 1;
  iris_cuda_archive* d = nullptr;
  char msg[512];
  EXPECT_EQ(iris_cuda_upload(a.get(), &o, &d, msg, sizeof msg), IRIS_ERR_CORRUPT);
  EXPECT_EQ(d, nullptr);
  EXPECT_NE(std::string(msg).find("model.layers.0.mlp.down_proj.weight"), std::string::npos) << msg;
}

}  // namespace
}  // namespace iris::capi_test
