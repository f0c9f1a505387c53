#include "converter/cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace iris {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && stderr_is_terminal()), start_(std::chrono::steady_clock::now()), last_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;  // redraw at most 10x/s
  last_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? done / secs : 0;
  double frac = total ? double(done) / double(total) : 1.0;
  const int width = 30;
  int fill = int(frac * width);
  std::string bar(size_t(fill), '#');
  bar.append(size_t(width - fill), '.');
  char eta[32] = "--";
  if (rate > 0 && total >= done) {
    double left = (total - done) / rate;
    std::snprintf(eta, sizeof eta, "%dm%02ds", int(left) / 60, int(left) % 60);
  }
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %s/%s %s/s ETA %s   ", label_.c_str(), bar.c_str(), frac * 100,
               human_bytes(double(done)).c_str(), human_bytes(double(total)).c_str(), human_bytes(rate).c_str(), eta);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\n");
    drawn_ = false;
  }
}

}  // namespace iris
