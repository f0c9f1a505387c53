#include "kernels/device_archive.h"

#include "formats/tensor_decode.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/checked_math.h"
#include "common/hashing.h"
#include "common/thread_team.h"
#include "kernels/cuda_check.h"
#include "kernels/kernels.h"
#include "kernels/device_guard.h"

namespace iris {

namespace {

constexpr uint64_t kDeviceAlign = 256;

// One component in the byte stream an upload copies: [stream_offset, +size) of the stream
// holds file bytes [file_offset, +size); the stream pads each component to kDeviceAlign, so
// that the stream IS the device layout and each staging buffer is one contiguous copy.
struct Segment {
  uint64_t stream_offset, file_offset, size;
  size_t tensor, component;
  uint32_t file;  // which file of an archive set (StoredComponent::file)
};

}  // namespace

struct Uploader::State {
  DeviceInfo device;
  StagingOptions options;
  cudaStream_t stream = nullptr;
  void* pinned = nullptr;
  std::vector<void*> staging;  // buffers inside `pinned`
  std::vector<cudaEvent_t> done;

  ~State() {
    DeviceGuard g(device.ordinal);
    if (stream) cudaStreamSynchronize(stream);
    for (auto e : done) cudaEventDestroy(e);
    if (pinned) cudaFreeHost(pinned);
    if (stream) cudaStreamDestroy(stream);
  }
};

Uploader::Uploader(std::unique_ptr<State> s) : s_(std::move(s)) {}
Uploader::Uploader(Uploader&&) noexcept = default;
Uploader& Uploader::operator=(Uploader&&) noexcept = default;
Uploader::~Uploader() = default;
const DeviceInfo& Uploader::device() const { return s_->device; }

Result<Uploader> Uploader::create(const StagingOptions& o) {
  if (o.buffer_bytes < (1u << 20) || o.buffer_bytes > (1ull << 32) || o.buffers < 2 || o.buffers > 64)
    return invalid_argument("staging: buffers of 1 MiB .. 4 GiB, 2 .. 64 of them");
  IRIS_ASSIGN_OR_RETURN(DeviceInfo info, query_device(o.device));
  DeviceGuard guard(o.device);
  if (!guard.ok()) return Status::error(ErrorKind::kDevice, "cannot select CUDA device " + std::to_string(o.device));
  auto s = std::make_unique<State>();
  s->device = info;
  s->options = o;
  if (s->options.threads <= 0) s->options.threads = int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
  IRIS_CUDA_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  // One pinned allocation for all buffers: pinning is paid per call, not per byte alone.
  IRIS_CUDA_TRY(cudaHostAlloc(&s->pinned, uint64_t(o.buffers) * o.buffer_bytes, cudaHostAllocDefault));
  for (uint32_t i = 0; i < o.buffers; ++i) {
    s->staging.push_back(static_cast<uint8_t*>(s->pinned) + uint64_t(i) * o.buffer_bytes);
    cudaEvent_t e;
    IRIS_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s->done.push_back(e);
  }
  return Uploader(std::move(s));
}

namespace {
// Whether the tensor-core GEMV would run v (batch 1) once its codes are in bit-plane order.
bool takes_planes(QuantView v, const LaunchConfig& c) {
  v.codes_planes = true;
  return cuda_gemv_uses_tensor_cores(v, 1, c);
}
}  // namespace

Result<DeviceArchive> Uploader::upload(const IrisArchive& a, const std::vector<std::string>& names, bool verify) {
  const auto& all = a.manifest().tensors;
  std::vector<size_t> chosen;
  if (names.empty()) {
    for (size_t i = 0; i < all.size(); ++i) chosen.push_back(i);
  } else {
    for (const auto& n : names) {
      auto i = a.index_of(n);
      if (!i) return invalid_argument(a.path() + ": no tensor '" + n + "' to upload");
      chosen.push_back(*i);
    }
    std::sort(chosen.begin(), chosen.end());  // file order: sequential reads
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  }

  DeviceArchive out;
  out.device_ = s_->device;
  std::vector<Segment> segs;
  uint64_t stream_bytes = 0;
  for (size_t ti = 0; ti < chosen.size(); ++ti) {
    const ArchiveTensor& t = all[chosen[ti]];
    DeviceArchive::Tensor dt;
    dt.archive_index = chosen[ti];
    dt.desc = t.desc;
    for (size_t ci = 0; ci < t.components.size(); ++ci) {
      const auto& c = t.components[ci];
      dt.specs.push_back(c.spec);
      segs.push_back({stream_bytes, a.absolute_offset(c), c.spec.bytes, ti, ci, c.file});
      stream_bytes = round_up(stream_bytes + c.spec.bytes, kDeviceAlign);
    }
    out.by_name_.emplace(t.desc.name, out.tensors_.size());
    out.tensors_.push_back(std::move(dt));
  }

  DeviceGuard guard(s_->device.ordinal);
  if (!guard.ok()) return Status::error(ErrorKind::kDevice, "cannot select CUDA device " + std::to_string(s_->device.ordinal));
  const auto t0 = std::chrono::steady_clock::now();
  if (stream_bytes) {
    cudaError_t e = cudaMalloc(&out.base_, stream_bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::error(ErrorKind::kDevice, a.path() + ": cannot allocate " + std::to_string(stream_bytes) +
                                                   " bytes on the GPU: " + cudaGetErrorString(e));
    }
  }
  out.bytes_ = stream_bytes;

  // Fill staging buffer after buffer: `threads` slices in parallel with pread (no page faults
  // on the mapping), then one asynchronous copy; a buffer is refilled only after its copy's
  // event. Padding between components is zeroed.
  const uint64_t buf_bytes = s_->options.buffer_bytes;
  ThreadTeam team(s_->options.threads);  // started once for the upload, joined when it returns
  const int threads = team.size();
  std::vector<StreamingHash> hashes(verify ? segs.size() : 0);
  size_t first_seg = 0;
  Status fill_status;
  for (uint64_t pos = 0, chunk = 0; pos < stream_bytes; pos += buf_bytes, ++chunk) {
    const uint64_t len = std::min(buf_bytes, stream_bytes - pos);
    const size_t slot = chunk % s_->staging.size();
    IRIS_CUDA_TRY(cudaEventSynchronize(s_->done[slot]));
    auto* buf = static_cast<uint8_t*>(s_->staging[slot]);
    while (first_seg < segs.size() && round_up(segs[first_seg].stream_offset + segs[first_seg].size, kDeviceAlign) <= pos) ++first_seg;
    const uint64_t slice = round_up(ceil_div(len, uint64_t(threads)), 4096);
    std::vector<Status> slice_status(static_cast<size_t>(threads));
    team.run([&](int th) {
      const uint64_t s0 = pos + std::min(len, uint64_t(th) * slice), s1 = pos + std::min(len, uint64_t(th + 1) * slice);
      uint64_t at = s0;
      for (size_t si = first_seg; si < segs.size() && at < s1; ++si) {
        const Segment& sg = segs[si];
        if (sg.stream_offset >= s1) break;
        const uint64_t seg_end = sg.stream_offset + sg.size;
        if (at < sg.stream_offset) {  // padding before this segment
          std::memset(buf + (at - pos), 0, sg.stream_offset - at);
          at = sg.stream_offset;
        }
        if (at < seg_end) {
          const uint64_t n = std::min(seg_end, s1) - at;
          Status st = a.file_mapping(sg.file).read_at(sg.file_offset + (at - sg.stream_offset), buf + (at - pos), n);
          if (!st.is_ok()) {
            slice_status[size_t(th)] = st;
            break;
          }
          at += n;
        }
      }
      if (at < s1) std::memset(buf + (at - pos), 0, s1 - at);  // trailing padding
    });
    for (auto& st : slice_status) IRIS_TRY(st);
    if (verify)
      for (size_t si = first_seg; si < segs.size() && segs[si].stream_offset < pos + len; ++si) {
        const uint64_t b = std::max(pos, segs[si].stream_offset), e = std::min(pos + len, segs[si].stream_offset + segs[si].size);
        if (e > b) hashes[si].update(buf + (b - pos), e - b);
      }
    IRIS_CUDA_TRY(cudaMemcpyAsync(static_cast<uint8_t*>(out.base_) + pos, buf, len, cudaMemcpyHostToDevice, s_->stream));
    IRIS_CUDA_TRY(cudaEventRecord(s_->done[slot], s_->stream));
  }
  IRIS_CUDA_TRY(cudaStreamSynchronize(s_->stream));

  for (size_t si = 0; si < segs.size(); ++si) {
    const Segment& sg = segs[si];
    const ArchiveTensor& t = all[out.tensors_[sg.tensor].archive_index];
    const StoredComponent& c = t.components[sg.component];
    if (verify && hashes[si].digest() != c.xxh3)
      return corrupt_data(a.path() + ": tensor '" + t.desc.name + "': component '" + role_name(c.spec.role) +
                          "': checksum mismatch (the bytes were damaged)");
    out.tensors_[sg.tensor].pointers[static_cast<int>(c.spec.role)] = static_cast<uint8_t*>(out.base_) + sg.stream_offset;
  }
  // MXFP4 codes go to the kernels' bit-plane order (kernels/mxfp4_planes.h): a pass over them
  // on the device, after the checksums of the staged bytes. Only where the tensor-core GEMV
  // takes them so (it reads no other order): on code without BF16 mma (Turing, a compute_75
  // build) the CUDA-core kernels would only undo it at every word.
  bool rearranged = false;
  for (auto& t : out.tensors_) {
    if (!is_quantized(t.desc.format)) continue;
    t.view = make_quant_view(t.desc, t.pointers);
    // An int_group permutation indexes the kernels' writes and reads: one that is not one
    // leaves the tensor without a view (each use of it then fails, naming why).
    if (t.view.is_ok() && t.view->permutation) {
      const ArchiveTensor& held = all[t.archive_index];
      Status perm = check_int_group_permutation(held.desc, a.component_bytes(held)[static_cast<int>(Role::kPermutation)]);
      if (!perm.is_ok()) t.view = Result<QuantView>(perm);
    }
    // NVFP4: the tensor-core GEMV only where its order of operations stands for the reference's.
    if (t.view.is_ok() && t.view->format == ViewFormat::kNvfp4)
      t.view->nvfp4_mma_safe = nvfp4_tensor_scales_mma_safe(a.component_bytes(all[t.archive_index])[static_cast<int>(Role::kTensorScale)],
                                                            t.view->nvfp4_divides);
    if (t.view.is_ok() && t.view->format == ViewFormat::kMxfp4 && takes_planes(*t.view, out.launch_config())) {
      IRIS_TRY(cuda_mxfp4_to_planes(*t.view, s_->stream));
      rearranged = true;
    }
  }
  if (rearranged) IRIS_CUDA_TRY(cudaStreamSynchronize(s_->stream));
  out.seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

DeviceArchive::DeviceArchive(DeviceArchive&& o) noexcept { *this = std::move(o); }

DeviceArchive& DeviceArchive::operator=(DeviceArchive&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    seconds_ = o.seconds_;
    nf4_bf16_table_ = o.nf4_bf16_table_;
    absmax_bf16_ = std::exchange(o.absmax_bf16_, nullptr);
    tensors_ = std::move(o.tensors_);
    by_name_ = std::move(o.by_name_);
  }
  return *this;
}

DeviceArchive::~DeviceArchive() { release(); }

void DeviceArchive::release() {
  if (!base_ && !absmax_bf16_) return;
  DeviceGuard g(device_.ordinal);
  cudaDeviceSynchronize();  // kernels may still read these tensors on a caller's stream
  cudaFree(base_);
  cudaFree(absmax_bf16_);
  base_ = nullptr;
  absmax_bf16_ = nullptr;
}

Status DeviceArchive::set_nf4_bf16_table(bool on) {
  if (on == nf4_bf16_table_) return Status::ok();
  // Expert sets and other holders copy the views, which then point at the absmax worked out
  // below: freeing it under them is what switching off would do.
  if (!on) return invalid_argument("nf4 table: the BF16 table cannot be switched off once on (views copied from it would dangle)");
  DeviceGuard g(device_.ordinal);
  if (!g.ok()) return Status::error(ErrorKind::kDevice, "nf4 table: cannot select device " + std::to_string(device_.ordinal));
  // Each tiled NF4 tensor's share of one allocation, 256-byte aligned.
  std::vector<std::pair<Tensor*, uint64_t>> at;  // tensor, offset
  uint64_t bytes = 0;
  for (auto& t : tensors_) {
    const uint64_t blocks = t.view.is_ok() ? nf4_absmax_blocks(*t.view) : 0;
    if (blocks == 0) continue;
    at.emplace_back(&t, bytes);
    bytes += (blocks * 2 + 255) / 256 * 256;
  }
  if (bytes) {
    void* p = nullptr;
    IRIS_CUDA_TRY(cudaMalloc(&p, bytes));
    auto slot = [p](uint64_t offset) { return reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p) + offset); };
    Status s = Status::ok();
    for (size_t i = 0; i < at.size() && s.is_ok(); ++i) s = cuda_nf4_absmax_bf16(*at[i].first->view, slot(at[i].second), nullptr);
    if (s.is_ok()) {
      const cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) s = Status::error(ErrorKind::kDevice, std::string("nf4 table: ") + cudaGetErrorString(e));
    }
    if (!s.is_ok()) {  // no view points at it yet
      cudaFree(p);
      return s;
    }
    for (auto& [t, offset] : at) t->view->absmax_bf16 = slot(offset);
    absmax_bf16_ = p;
    bytes_ += bytes;
  }
  nf4_bf16_table_ = true;
  return Status::ok();
}

const DeviceArchive::Tensor* DeviceArchive::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace iris
