// A one-line progress report on stderr for long data work: items/s, MB/s, percent and ETA.
// On a terminal the line is redrawn in place (\r) about 5 times a second; otherwise (logs, tests) a
// full line is printed every few seconds. finish() prints the final line with a newline.
#pragma once
#include <cstdint>
#include <string>

#include "base/timer.h"

namespace orion::data {

class Progress {
 public:
  // label: "prepare"; unit: what is counted ("docs"); total_bytes 0 when unknown (no ETA).
  Progress(std::string label, std::string unit, uint64_t total_bytes, bool enabled = true);
  void update(uint64_t items, uint64_t bytes);  // cheap when called often: prints only on schedule
  void finish(uint64_t items, uint64_t bytes);
  double seconds() const { return timer_.seconds(); }

 private:
  void print(uint64_t items, uint64_t bytes, bool final);

  std::string label_, unit_;
  uint64_t total_;
  bool enabled_, tty_;
  Timer timer_;
  double last_print_ = -1e9;
};

std::string format_duration(double seconds);  // "1:02:03", "4:05"

}  // namespace orion::data
