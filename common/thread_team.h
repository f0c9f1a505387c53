// A few threads kept for the length of one call that runs many short parallel steps (the GPU
// upload fills one staging buffer after another), so a step costs a barrier instead of thread
// starts. Like common/parallel_for.h, nothing outlives the call: the destructor joins every
// thread. Waiting is std::barrier's (a short spin, then a futex), never a long idle spin.
#pragma once

#include <atomic>
#include <barrier>
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

 private:
  void helper_loop(int member);

  int size_ = 1;
  std::barrier<> start_, done_;
  const std::function<void(int)>* step_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace iris
