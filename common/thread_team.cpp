#include "common/thread_team.h"

#include <algorithm>
#include <system_error>

#include "common/parallel_for.h"

namespace iris {

ThreadTeam::ThreadTeam(int threads) : start_(std::max(threads, 1)), done_(std::max(threads, 1)) {
  const int wanted = std::max(threads, 1);
  for (int m = 1; m < wanted; ++m) {
    try {
      helpers_.emplace_back(&ThreadTeam::helper_loop, this, m);
    } catch (const std::system_error&) {
      // The members that could not start leave both barriers, so the rest never wait for them.
      for (int missing = m; missing < wanted; ++missing) {
        start_.arrive_and_drop();
        done_.arrive_and_drop();
      }
      break;
    }
  }
  size_ = 1 + int(helpers_.size());
}

ThreadTeam::~ThreadTeam() {
  stopping_.store(true, std::memory_order_relaxed);
  start_.arrive_and_wait();  // the barrier orders the flag before the helpers read it
  for (auto& h : helpers_) h.join();
}

void ThreadTeam::run(const std::function<void(int)>& step) {
  step_ = &step;
  start_.arrive_and_wait();
  {
    ThreadLimit serial(1);
    step(0);
  }
  done_.arrive_and_wait();
}

void ThreadTeam::helper_loop(int member) {
  ThreadLimit serial(1);
  for (;;) {
    start_.arrive_and_wait();
    if (stopping_.load(std::memory_order_relaxed)) return;
    (*step_)(member);
    done_.arrive_and_wait();
  }
}

}  // namespace iris
