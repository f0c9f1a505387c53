// `iris verify --device cuda`: every quantized tensor through the GPU dequant kernel,
// compared bit for bit with the CPU reference decode, plus a GEMV probe against a double
// precision CPU dot product within the kernel's accumulation bound (for NF4 on the tensor
// cores, with the exact and with the declared BF16 table).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/float_bits.h"
#include "kernels/device_archive.h"
#include "kernels/kernels.h"
#include "verify/device_checks.h"
#include "verify/gemv_bound.h"
#include "formats/tensor_decode.h"

namespace iris {

namespace {

struct DeviceMem {
  void* p = nullptr;
  ~DeviceMem() { if (p) cudaFree(p); }
};

std::string cuda_text(cudaError_t e) { return cudaGetErrorString(e); }

// Dequantizes the uploaded tensor on the GPU into FP32 and BF16 and compares with the CPU
// reference; then a GEMV probe within its accumulation bound.
void check_tensor(const IrisArchive& a, const ArchiveTensor& t, const DeviceArchive& dev, TensorReport* tr) {
  auto fail = [&](const std::string& check, const std::string& why) { tr->checks.push_back({check, false, why}); };
  const DeviceArchive::Tensor& dt = dev.tensors().front();
  if (!dt.view.is_ok()) return fail("gpu:dequant", dt.view.status().message());
  const QuantView& view = *dt.view;
  const LaunchConfig launch = dev.launch_config();
  uint64_t numel = 1;
  for (auto d : t.desc.shape) numel *= d;
  std::vector<float> ref(numel);
  Status rs = reference_decode(t.desc, a.component_bytes(t), ref.data());
  if (!rs.is_ok()) return fail("cpu:decode", rs.message());

  const uint64_t rows = view.rows, k = view.k;
  auto coord = [&](uint64_t i) { return "element " + std::to_string(i) + " (row " + std::to_string(i / k) + ", col " + std::to_string(i % k) + ")"; };
  // FP32 output: must equal the reference bit for bit. The buffer is poisoned first so an
  // element the kernel never writes cannot pass.
  {
    DeviceMem out;
    std::vector<float> got(numel);
    cudaError_t e = cudaMalloc(&out.p, std::max<uint64_t>(numel * 4, 16));
    if (e == cudaSuccess) e = cudaMemset(out.p, 0xff, numel * 4);
    if (e != cudaSuccess) return fail("gpu:dequant_f32", cuda_text(e));
    Status s = cuda_dequantize(view, out.p, DType::kF32, nullptr, launch);
    if (s.is_ok()) {
      e = cudaMemcpy(got.data(), out.p, numel * 4, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) s = Status::error(ErrorKind::kDevice, cuda_text(e));
    }
    if (!s.is_ok()) return fail("gpu:dequant_f32", s.message());
    CheckResult r{"gpu:dequant_f32", true, ""};
    for (uint64_t i = 0; i < numel; ++i)
      if (std::memcmp(&got[i], &ref[i], 4) != 0) {
        char buf[128];
        std::snprintf(buf, sizeof buf, ": gpu %08x cpu %08x", f32_bits(got[i]), f32_bits(ref[i]));
        r = {"gpu:dequant_f32", false, "first mismatch at " + coord(i) + buf};
        break;
      }
    tr->checks.push_back(r);
  }
  // BF16 output: the reference rounded once.
  {
    DeviceMem out;
    std::vector<uint16_t> got(numel);
    cudaError_t e = cudaMalloc(&out.p, std::max<uint64_t>(numel * 2, 16));
    if (e == cudaSuccess) e = cudaMemset(out.p, 0xff, numel * 2);
    if (e != cudaSuccess) return fail("gpu:dequant_bf16", cuda_text(e));
    Status s = cuda_dequantize(view, out.p, DType::kBF16, nullptr, launch);
    if (s.is_ok()) {
      e = cudaMemcpy(got.data(), out.p, numel * 2, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) s = Status::error(ErrorKind::kDevice, cuda_text(e));
    }
    if (!s.is_ok()) return fail("gpu:dequant_bf16", s.message());
    CheckResult r{"gpu:dequant_bf16", true, ""};
    for (uint64_t i = 0; i < numel; ++i)
      if (got[i] != f32_to_bf16(ref[i])) {
        char buf[64];
        std::snprintf(buf, sizeof buf, ": gpu %04x cpu %04x", got[i], f32_to_bf16(ref[i]));
        r = {"gpu:dequant_bf16", false, "first mismatch at " + coord(i) + buf};
        break;
      }
    tr->checks.push_back(r);
  }
  // GEMV probe, batch 1: fresh random activations every run.
  if (t.desc.layout.kind == LayoutKind::kTiled) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> x(k);
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    DeviceMem dx, dy;
    std::vector<float> y(rows);
    cudaError_t e = cudaMalloc(&dx.p, std::max<uint64_t>(k * 2, 16));
    if (e == cudaSuccess) e = cudaMalloc(&dy.p, std::max<uint64_t>(rows * 4, 16));
    if (e == cudaSuccess) e = cudaMemcpy(dx.p, x.data(), k * 2, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return fail("gpu:gemv", cuda_text(e));
    // One GEMV under `config` into y, its output poisoned first, held to its bound as `check`;
    // false (and a failed check) where it could not run.
    auto probe = [&](const LaunchConfig& config, const char* check) {
      cudaError_t err = cudaMemset(dy.p, 0xff, rows * 4);
      Status s = err == cudaSuccess ? cuda_gemv(view, static_cast<const uint16_t*>(dx.p), 1, dy.p, DType::kF32, nullptr, config)
                                    : Status::error(ErrorKind::kDevice, cuda_text(err));
      if (s.is_ok() && (err = cudaMemcpy(y.data(), dy.p, rows * 4, cudaMemcpyDeviceToHost)) != cudaSuccess)
        s = Status::error(ErrorKind::kDevice, cuda_text(err));
      if (!s.is_ok()) {
        fail(check, s.message());
        return false;
      }
      const bool nf4_bf16_table = config.nf4_bf16_table && view.format == ViewFormat::kNf4;
      tr->checks.push_back(check_gemv_row_sums(ref.data(), x.data(), rows, k, y.data(), check,
                                               gemv_accumulation(cuda_gemv_uses_tensor_cores(view, 1, config), nf4_bf16_table)));
      return true;
    };
    if (!probe(launch, "gpu:gemv")) return;
    // NF4 on the tensor cores: also the declared BF16 table (IRIS_NF4_TABLE_BF16), within its bound.
    if (view.format == ViewFormat::kNf4 && cuda_gemv_uses_tensor_cores(view, 1, launch)) {
      LaunchConfig bf16_table = launch;
      bf16_table.nf4_bf16_table = true;
      probe(bf16_table, "gpu:gemv_nf4_bf16_table");
    }
  }
}

}  // namespace

Status run_device_checks(const IrisArchive& archive, VerifyReport* report) {
  // One tensor on the GPU at a time (through one set of staging buffers), so any archive
  // whose largest tensor fits can be checked.
  StagingOptions so;
  so.buffer_bytes = 16ull << 20;
  so.buffers = 2;
  auto uploader = Uploader::create(so);
  if (!uploader.is_ok()) return uploader.status();
  report->device = "cuda (" + uploader->device().name + ")";
  // Each tensor's row of the report, made here when the caller has not made them (verify makes
  // them in its checksum pass; verify --ranks runs these checks alone).
  if (report->tensors.size() != archive.manifest().tensors.size()) {
    report->tensors.clear();
    for (const auto& t : archive.manifest().tensors) {
      TensorReport tr;
      tr.name = t.desc.name;
      tr.format = storage_name(t.desc);
      report->tensors.push_back(std::move(tr));
    }
  }
  for (size_t i = 0; i < archive.manifest().tensors.size(); ++i) {
    const auto& t = archive.manifest().tensors[i];
    if (!is_quantized(t.desc.format)) continue;
    auto dev = uploader->upload(archive, {t.desc.name}, false);
    if (!dev.is_ok()) {
      report->tensors[i].checks.push_back({"gpu:upload", false, dev.status().message()});
      continue;
    }
    check_tensor(archive, t, *dev, &report->tensors[i]);
  }
  return Status::ok();
}

}  // namespace iris
