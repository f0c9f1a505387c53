// A progress bar with rate and ETA on stderr, drawn only when stderr is a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace iris {

class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();
  void update(uint64_t done, uint64_t total);
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

bool stderr_is_terminal();
std::string human_bytes(double bytes);

// One frame of the bar, fitted to a terminal `columns` wide (0: unknown, taken as 80): the bar
// shrinks from 30 cells to none, then the line is cut, so that it never wraps (a wrapped line
// cannot be redrawn in place with a carriage return).
std::string progress_line(const std::string& label, uint64_t done, uint64_t total, double seconds, int columns);
// The width of the terminal on stderr, 0 when it is not one or does not say.
int stderr_columns();

}  // namespace iris
