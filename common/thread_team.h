// A few threads kept for the length of one call that runs many short parallel steps (the GPU
// upload fills one 4 MiB staging buffer after another: about 76 us each at 55 GB/s), so a step
// costs a hand-off instead of thread starts. Like common/parallel_for.h, nothing outlives the call:
// the destructor joins every thread.
//
// Waiting: between steps a member spins for up to kSpinMicros and then sleeps on a futex
// (std::atomic::wait). Inside a call the next step is microseconds away: with std::barrier's
// futex wakes of 15 threads per step the upload's default configuration reached 55.7% of
// pinned cudaMemcpy on an H100, with this spin 78.9-90.6% in later runs (separate runs:
// docs/BENCHMARKS.md, issue 24 item 6); after the call nothing is left to spin.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace iris {

class ThreadTeam {
 public:
  // A team of `threads` members (>= 1), the caller being member 0. Fewer if the system refuses
  // to start a thread: size() says how many.
  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // step(member) on every member at once; returns when all have. step must not throw.
  void run(const std::function<void(int member)>& step);

  static constexpr int kSpinMicros = 100;

 private:
  void helper_loop(int member);

  int size_ = 1;
  const std::function<void(int)>* step_ = nullptr;
  std::atomic<uint64_t> generation_{0};  // one more per step; the destructor's last one stops
  std::atomic<int> pending_{0};          // helpers still in the current step
  bool stopping_ = false;                // written before the last generation, read after it
  std::vector<std::thread> helpers_;
};

}  // namespace iris
