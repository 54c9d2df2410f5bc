// The process's peak resident memory (what `top` calls RES at its highest so far): the figure a
// user compares with the RAM a machine has. Memory-mapped weight files count only for the pages
// actually touched, which is the point of mapping them.
#pragma once
#include <cstdint>

#include <sys/resource.h>

namespace orion {

// Bytes; 0 if the system does not say. getrusage's ru_maxrss is KiB on Linux, bytes on macOS.
inline uint64_t peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
#if defined(__APPLE__)
  return uint64_t(u.ru_maxrss);
#else
  return uint64_t(u.ru_maxrss) * 1024;
#endif
}

}  // namespace orion
