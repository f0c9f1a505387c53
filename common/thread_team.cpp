#include "common/thread_team.h"

#include <chrono>
#include <system_error>

#include "common/parallel_for.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IRIS_SPIN_PAUSE() _mm_pause()
#else
#define IRIS_SPIN_PAUSE() std::this_thread::yield()
#endif

namespace iris {
namespace {

// Until done() holds: spin (pausing) for up to kSpinMicros, then sleep on `word` until it
// changes from what was last seen.
template <typename T, typename Done>
void await(const std::atomic<T>& word, Done&& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadTeam::kSpinMicros);
  for (int i = 1; !done(); ++i) {
    if (i % 64 != 0) {
      IRIS_SPIN_PAUSE();
      continue;
    }
    if (std::chrono::steady_clock::now() < until) continue;
    for (T seen = word.load(std::memory_order_acquire); !done(); seen = word.load(std::memory_order_acquire)) word.wait(seen, std::memory_order_acquire);
    return;
  }
}

}  // namespace

ThreadTeam::ThreadTeam(int threads) {
  for (int m = 1; m < threads; ++m) {
    try {
      helpers_.emplace_back(&ThreadTeam::helper_loop, this, m);
    } catch (const std::system_error&) {
      break;  // a smaller team: the members that started are numbered 1..size-1 all the same
    }
  }
  size_ = 1 + int(helpers_.size());
}

ThreadTeam::~ThreadTeam() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_release);  // publishes stopping_
  generation_.notify_all();
  for (auto& h : helpers_) h.join();
}

void ThreadTeam::run(const std::function<void(int)>& step) {
  step_ = &step;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes step_ and pending_
  generation_.notify_all();
  {
    ThreadLimit serial(1);
    step(0);
  }
  await(pending_, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadTeam::helper_loop(int member) {
  ThreadLimit serial(1);
  uint64_t seen = 0;
  for (;;) {
    await(generation_, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_) return;
    (*step_)(member);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace iris
