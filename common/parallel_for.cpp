#include "common/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace iris {
namespace {

// 0: no ThreadLimit in force on this thread.
thread_local int t_limit = 0;

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Runs task(t) for t in [0, count): t = 0 on the caller, the others on threads started here and
// joined before returning. Every task runs with a limit of 1. A thread the system refuses to
// start has its task run on the caller instead. The first exception (in task order) is rethrown.
void run_tasks(int count, const std::function<void(int)>& task) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
  auto guarded = [&](int t) {
    ThreadLimit serial(1);
    try {
      task(t);
    } catch (...) {
      errors[size_t(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(size_t(count));
  std::vector<int> on_caller{0};
  for (int t = 1; t < count; ++t) {
    try {
      threads.emplace_back(guarded, t);
    } catch (const std::system_error&) {
      on_caller.push_back(t);
    }
  }
  for (int t : on_caller) guarded(t);
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

ThreadLimit::ThreadLimit(int threads) : saved_(t_limit) {
  if (threads > 0) t_limit = threads;
}

ThreadLimit::~ThreadLimit() { t_limit = saved_; }

int parallel_threads() { return t_limit > 0 ? t_limit : usable_cpus(); }

void parallel_blocks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& block) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t by_work = (n + grain - 1) / grain;
  const int count = int(std::min<int64_t>(parallel_threads(), by_work));
  if (count <= 1) {
    ThreadLimit serial(1);
    block(0, n);
    return;
  }
  // Block t covers [t * n / count, (t + 1) * n / count): sizes differ by at most one.
  run_tasks(count, [&](int t) { block(n * t / count, n * (t + 1) / count); });
}

void parallel_for_dynamic(int64_t n, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  const int count = int(std::min<int64_t>(parallel_threads(), n));
  std::atomic<int64_t> next{0};
  auto drain = [&](int) {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) body(i);
  };
  if (count <= 1) {
    ThreadLimit serial(1);
    drain(0);
    return;
  }
  run_tasks(count, drain);
}

}  // namespace iris
