#include "converter/cli/partial_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

namespace iris {

namespace {

// Paths of live partial files, readable from a signal handler: fixed slots of fixed size,
// published with atomics, so the handler never allocates or locks. Process-wide by nature
// (signal handlers are), and owned by the command line.
constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];
std::atomic<bool> g_handlers_installed{false};

extern "C" void on_fatal_signal(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) unlink(g_paths[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

class SignalSlots final : public PartialFileRegistry {
 public:
  int add(const std::string& path) override {
    if (path.size() >= kPathMax) return -1;
    for (int i = 0; i < kSlots; ++i) {
      bool expected = false;
      if (g_used[i].load() == false) {
        std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
        if (g_used[i].compare_exchange_strong(expected, true)) return i;
      }
    }
    return -1;
  }
  void remove(int slot) override {
    if (slot >= 0) g_used[slot].store(false);
  }
};

SignalSlots g_registry;

}  // namespace

PartialFileRegistry* install_partial_file_cleanup() {
  if (!g_handlers_installed.exchange(true)) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  }
  return &g_registry;
}

}  // namespace iris
