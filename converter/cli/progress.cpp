#include "converter/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
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

int stderr_columns() {
  winsize w{};
  return ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 ? int(w.ws_col) : 0;
}

std::string progress_line(const std::string& label, uint64_t done, uint64_t total, double seconds, int columns) {
  if (columns <= 0) columns = 80;
  const double rate = seconds > 0 ? done / seconds : 0;
  const double frac = total ? double(done) / double(total) : 1.0;
  char eta[32] = "--";
  if (rate > 0 && total >= done) {
    const double left = (total - done) / rate;
    std::snprintf(eta, sizeof eta, "%dm%02ds", int(left) / 60, int(left) % 60);
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, " %3.0f%% %s/%s %s/s ETA %s", frac * 100, human_bytes(double(done)).c_str(),
                human_bytes(double(total)).c_str(), human_bytes(rate).c_str(), eta);
  // label + " [" + bar + "]" + tail, one column left free for the cursor.
  const int fixed = int(label.size() + 3 + std::string(tail).size()), room = columns - 1 - fixed;
  std::string line = label;
  if (room > 0) {
    const int width = std::min(room, 30), fill = std::min(width, int(frac * width));
    line += " [" + std::string(size_t(fill), '#') + std::string(size_t(width - fill), '.') + "]";
  }
  line += tail;
  if (int(line.size()) > columns - 1) line.resize(size_t(std::max(columns - 1, 0)));
  return line;
}

void ProgressBar::update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;  // redraw at most 10x/s
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  // "\x1b[K" clears what a longer frame (or a wider terminal before a resize) left on the line.
  std::fprintf(stderr, "\r%s\x1b[K", progress_line(label_, done, total, secs, stderr_columns()).c_str());
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
