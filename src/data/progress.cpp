#include "data/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace orion::data {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const uint64_t s = uint64_t(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(std::string label, std::string unit, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total_bytes), enabled_(enabled), tty_(isatty(2)) {}

void Progress::update(uint64_t items, uint64_t bytes) {
  if (!enabled_) return;
  const double now = timer_.seconds();
  if (now - last_print_ < (tty_ ? 0.2 : 5.0)) return;
  last_print_ = now;
  print(items, bytes, false);
}

void Progress::finish(uint64_t items, uint64_t bytes) {
  if (enabled_) print(items, bytes, true);
}

void Progress::print(uint64_t items, uint64_t bytes, bool final) {
  const double t = std::max(timer_.seconds(), 1e-9);
  std::string line =
      fmt::format("{}: {} {}, {:.0f} {}/s, {:.1f} MB/s", label_, items, unit_, items / t, unit_, bytes / t / 1e6);
  if (total_ > 0 && !final) {
    const double frac = std::min(1.0, double(bytes) / double(total_));
    const double eta = frac > 0 ? t * (1 - frac) / frac : -1;
    line += fmt::format(", {:.0f}%, ETA {}", frac * 100, format_duration(eta));
  }
  if (final) line += fmt::format(", done in {:.1f} s", t);
  std::fprintf(stderr, tty_ ? "\r%s\033[K%s" : "%s%s", line.c_str(), final || !tty_ ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace orion::data
