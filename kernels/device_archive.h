// An archive's tensors on one GPU: the upload pipeline (file -> pinned staging -> device, the
// reads overlapped with the copies) and the device views the kernels take. The engine-facing
// half of the library; the C API (iris_cuda.h) and `iris verify --device cuda` are built on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "formats/iris_archive.h"
#include "kernels/device_info.h"
#include "kernels/quant_view.h"

namespace iris {

// Defaults from the sweep of run v19 (docs/device-runs/2026-11-23-v19-upload-sweep.json, H100,
// 3.6 GB from the page cache): small buffers, many in flight, one reader per core (4 MiB x 8,
// 16 threads: 93% of pinned cudaMemcpy; 64 MiB x 4, 8 threads: 52%). Likely, not measured:
// small buffers let the copy engine read the staged bytes from the last-level cache.
struct StagingOptions {
  int device = 0;
  uint64_t buffer_bytes = 4ull << 20;  // per pinned staging buffer
  uint32_t buffers = 8;                // in flight: one filling while the others copy
  int threads = 0;                     // host threads filling a buffer; <= 0: min(16, cores)
};

class DeviceArchive;

// The reusable part of an upload: the device's properties, pinned staging buffers, a copy
// stream and its events. Create once, upload many archives (or one tensor at a time).
class Uploader {
 public:
  static Result<Uploader> create(const StagingOptions& options);
  Uploader(Uploader&&) noexcept;
  Uploader& operator=(Uploader&&) noexcept;
  ~Uploader();

  // Uploads the named tensors (all when `names` is empty) of `archive` to one device
  // allocation; each component starts at a 256-byte boundary. With `verify`, every component
  // is hashed while it is staged and a mismatch is kCorrupt. Every component holds the
  // archive's bytes except the codes of MXFP4 tensors that the tensor-core GEMV runs, whose
  // words are put in its bit-plane order (kernels/mxfp4_planes.h; QuantView::codes_planes).
  // Returns once all of it is done.
  Result<DeviceArchive> upload(const IrisArchive& archive, const std::vector<std::string>& names, bool verify);

  const DeviceInfo& device() const;

 private:
  struct State;
  explicit Uploader(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

class DeviceArchive {
 public:
  struct Tensor {
    size_t archive_index = 0;    // in the host archive's manifest
    TensorDesc desc;
    std::vector<ComponentSpec> specs;
    DevicePointers pointers{};   // by role
    Result<QuantView> view = Status::error(ErrorKind::kUnsupported, "not quantized");  // quantized tensors the kernels take
  };

  DeviceArchive(DeviceArchive&&) noexcept;
  DeviceArchive& operator=(DeviceArchive&&) noexcept;
  ~DeviceArchive();  // frees the device memory (after synchronizing its device)

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(std::string_view name) const;
  const DeviceInfo& device() const { return device_; }
  LaunchConfig launch_config(const KernelVariants& variants = {}) const { return device_.launch_config(variants, nf4_bf16_table_); }
  // The declared precision of this archive's NF4 GEMVs (LaunchConfig::nf4_bf16_table), set
  // by its owner before any launch: off by default. On, it also works out each tiled NF4
  // tensor's absmax as one BF16 a block on the device (QuantView::absmax_bf16: 2 bytes a block,
  // a 16th of the codes' bytes, counted in device_bytes), which those GEMVs then read. Once on
  // it stays on (expert sets copy the views that point at it).
  Status set_nf4_bf16_table(bool on);
  bool nf4_bf16_table() const { return nf4_bf16_table_; }
  uint64_t device_bytes() const { return bytes_; }
  double upload_seconds() const { return seconds_; }  // staging, copies and the MXFP4 codes' rearrangement, wall clock

 private:
  friend class Uploader;
  DeviceArchive() = default;
  void release();

  DeviceInfo device_;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  double seconds_ = 0;
  bool nf4_bf16_table_ = false;
  void* absmax_bf16_ = nullptr;  // every NF4 tensor's QuantView::absmax_bf16, one allocation
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace iris
