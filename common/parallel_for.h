// Parallel loops for the library's codecs, on threads that exist only for the loop.
//
// Why not OpenMP here: libiris runs inside other people's processes (engines, notebooks, CI
// runners), and libgomp's idle workers spin between regions unless OMP_WAIT_POLICY=passive was
// in the environment when libgomp loaded, which a library can neither set nor undo. Measured on
// a busy 2-core machine, spinning workers made small conversions 20-40x slower (docs/BENCHMARKS.md,
// issue 24). These loops start their threads for the call and join them before returning: no
// thread of ours is left running, spinning or sleeping once a call is done. Starting a thread
// costs tens of microseconds, so a loop only goes parallel with enough work per thread (`grain`).
//
// Threads per loop: the calling thread's ThreadLimit if one is in force (the C API's `threads`
// arguments, the CLI's --threads), else the CPUs this process may run on. Inside a loop body
// the limit is 1, so a codec called from a parallel loop (or from a converter worker that says
// so with ThreadLimit(1)) runs on its own thread instead of multiplying threads.
#pragma once

#include <cstdint>
#include <functional>

namespace iris {

// Values of codec work (decode, encode, sums) worth starting a thread for: at the codecs'
// per-core speeds, 30-100+ us, several times what starting and joining a thread costs.
inline constexpr uint64_t kGrainValues = uint64_t(1) << 17;

// For the lifetime of the object, loops started by the calling thread use at most `threads`
// threads (<= 0: leave the current limit). Per thread and scoped, like OpenMP's nthreads ICV:
// there is no process-wide setting.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

// The number of threads a loop started now by the calling thread may use (>= 1).
int parallel_threads();

// Runs block(begin, end) over contiguous blocks that together cover [0, n) exactly once, each
// on its own thread (the caller runs the first); at most parallel_threads() blocks, and none
// smaller than `grain` iterations unless n is. Returns when every block has. An exception
// thrown by a block is rethrown here after the others finished.
void parallel_blocks(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& block);

// body(i) for every i in [0, n), in contiguous blocks as parallel_blocks.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, Body&& body) {
  parallel_blocks(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

// body(i) for every i in [0, n), each thread taking the next index when it is free: for items
// of very different cost (whole tensors).
void parallel_for_dynamic(int64_t n, const std::function<void(int64_t i)>& body);

}  // namespace iris
