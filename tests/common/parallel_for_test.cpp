// common/parallel_for.h and common/thread_team.h: every index exactly once, the thread limit
// honoured and scoped, exceptions carried to the caller, and (the reason they exist) no thread
// left behind once a call returns, counted in /proc/self/task.
#include "common/parallel_for.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/thread_team.h"

namespace iris {
namespace {

int live_threads() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.is_directory() ? 1 : 0;
  return n;
}

TEST(ParallelFor, EveryIndexExactlyOnce) {
  for (int limit : {1, 2, 3, 8}) {
    ThreadLimit scope(limit);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 100003}) {
      for (int64_t grain : {1, 3, 1000, 1 << 20}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        parallel_for(n, grain, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "limit " << limit << " n " << n << " grain " << grain << " i " << i;
      }
    }
  }
}

TEST(ParallelFor, DynamicEveryIndexExactlyOnce) {
  for (int limit : {1, 2, 5}) {
    ThreadLimit scope(limit);
    for (int64_t n : {0, 1, 5, 999}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for_dynamic(n, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "limit " << limit << " n " << n;
    }
  }
}

// Blocks are contiguous, at most `limit` of them, none under the grain, and each on its own
// thread (the test's limit is above this machine's core count on purpose: the limit, not the
// cores, decides).
TEST(ParallelFor, BlocksFollowTheLimitAndTheGrain) {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  std::set<std::thread::id> ids;
  auto record = [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    blocks.push_back({b, e});
    ids.insert(std::this_thread::get_id());
  };
  {
    ThreadLimit scope(6);
    EXPECT_EQ(parallel_threads(), 6);
    parallel_blocks(1000, 100, record);
  }
  EXPECT_EQ(blocks.size(), 6u);
  EXPECT_EQ(ids.size(), 6u);
  std::sort(blocks.begin(), blocks.end());
  int64_t at = 0;
  for (auto [b, e] : blocks) {
    EXPECT_EQ(b, at);
    EXPECT_GE(e - b, 100);
    at = e;
  }
  EXPECT_EQ(at, 1000);

  blocks.clear();
  ids.clear();
  {
    ThreadLimit scope(6);
    parallel_blocks(250, 100, record);  // room for 3 blocks of the grain, not 6
  }
  EXPECT_EQ(blocks.size(), 3u);
  EXPECT_EQ(ids.size(), 3u);
}

TEST(ParallelFor, LimitIsScopedAndOneInsideALoop) {
  const int outside = parallel_threads();
  EXPECT_GE(outside, 1);
  {
    ThreadLimit a(3);
    EXPECT_EQ(parallel_threads(), 3);
    {
      ThreadLimit b(0);  // <= 0 leaves the limit
      EXPECT_EQ(parallel_threads(), 3);
      ThreadLimit c(5);
      EXPECT_EQ(parallel_threads(), 5);
    }
    EXPECT_EQ(parallel_threads(), 3);
    std::atomic<int> inner_max{0};
    parallel_for(3, 1, [&](int64_t) {
      int seen = parallel_threads();
      int cur = inner_max.load();
      while (seen > cur && !inner_max.compare_exchange_weak(cur, seen)) {
      }
    });
    EXPECT_EQ(inner_max.load(), 1);  // nested loops stay on their thread
    EXPECT_EQ(parallel_threads(), 3);
  }
  EXPECT_EQ(parallel_threads(), outside);
}

TEST(ParallelFor, ExceptionReachesTheCallerAfterEveryBlock) {
  ThreadLimit scope(4);
  std::atomic<int> done{0};
  EXPECT_THROW(parallel_blocks(4, 1,
                               [&](int64_t b, int64_t) {
                                 if (b == 2) throw std::runtime_error("block 2");
                                 done.fetch_add(1);
                               }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 3);
  EXPECT_EQ(parallel_threads(), 4);  // the caller's limit restored after its own block
}

TEST(ParallelFor, NoThreadOutlivesTheCall) {
  const int before = live_threads();
  {
    ThreadLimit scope(8);
    std::atomic<int> peak{0};
    for (int round = 0; round < 20; ++round) {
      parallel_for(8, 1, [&](int64_t) {
        int now = live_threads();
        int cur = peak.load();
        while (now > cur && !peak.compare_exchange_weak(cur, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      EXPECT_EQ(live_threads(), before) << "round " << round;
    }
    EXPECT_GT(peak.load(), before);  // it did run in parallel
    parallel_for_dynamic(16, [](int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
    EXPECT_EQ(live_threads(), before);
  }
}

TEST(ThreadTeam, EveryMemberEveryStepThenJoined) {
  const int before = live_threads();
  {
    ThreadTeam team(5);
    ASSERT_EQ(team.size(), 5);
    EXPECT_EQ(live_threads(), before + 4);
    std::vector<std::atomic<int>> calls(5);
    for (int step = 0; step < 200; ++step) {
      std::vector<int> seen(5, 0);
      team.run([&](int m) {
        seen[size_t(m)] += 1;  // each member writes its own slot
        calls[size_t(m)].fetch_add(1);
        EXPECT_EQ(parallel_threads(), 1);
      });
      for (int m = 0; m < 5; ++m) ASSERT_EQ(seen[size_t(m)], 1) << "step " << step << " member " << m;
    }
    for (auto& c : calls) EXPECT_EQ(c.load(), 200);
    // Steps further apart than the spin: the members sleep on the futex and still wake.
    for (int step = 0; step < 5; ++step) {
      std::this_thread::sleep_for(std::chrono::microseconds(3 * ThreadTeam::kSpinMicros));
      team.run([&](int m) { calls[size_t(m)].fetch_add(1); });
    }
    for (auto& c : calls) EXPECT_EQ(c.load(), 205);
  }
  EXPECT_EQ(live_threads(), before);
  ThreadTeam alone(0);
  EXPECT_EQ(alone.size(), 1);
  int ran = 0;
  alone.run([&](int m) { ran += 1 + m; });
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace iris
