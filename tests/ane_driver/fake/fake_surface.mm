// The fake's IOSurface: see fake_surface.h.
#include "fake_surface.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

struct __IOSurface {
  size_t alloc = 0, mapped = 0;  // bytes asked for; bytes mapped (whole pages)
  uint8_t* memory = nullptr;
  int references = 1;
  int locks = 0;
  uint32_t lock_options = 0;
};

extern "C" {
const CFStringRef kIOSurfaceWidth = (CFStringRef) @"IOSurfaceWidth";
const CFStringRef kIOSurfaceHeight = (CFStringRef) @"IOSurfaceHeight";
const CFStringRef kIOSurfaceBytesPerElement = (CFStringRef) @"IOSurfaceBytesPerElement";
const CFStringRef kIOSurfaceBytesPerRow = (CFStringRef) @"IOSurfaceBytesPerRow";
const CFStringRef kIOSurfaceAllocSize = (CFStringRef) @"IOSurfaceAllocSize";
const CFStringRef kIOSurfacePixelFormat = (CFStringRef) @"IOSurfacePixelFormat";
}

namespace fake_ane {
namespace {

std::mutex& lock() {
  static std::mutex m;
  return m;
}
std::set<IOSurfaceRef>& live() {
  static std::set<IOSurfaceRef> s;
  return s;
}

void protect(IOSurfaceRef s, int prot) {
  if (s->mapped && mprotect(s->memory, s->mapped, prot) != 0) std::perror("fake IOSurface: mprotect");
}

// One property of IOSurfaceCreate's dictionary as an integer, or -1 when absent or not a number.
long long property(NSDictionary* d, CFStringRef key) {
  id v = [d objectForKey:(id)key];
  return [v isKindOfClass:[NSNumber class]] ? [v longLongValue] : -1;
}

}  // namespace

bool is_surface(IOSurfaceRef s) {
  std::lock_guard<std::mutex> g(lock());
  return live().count(s) != 0;
}
void retain_surface(IOSurfaceRef s) { s->references++; }
bool surface_locked(IOSurfaceRef s) { return s->locks > 0; }

std::vector<uint8_t> read_surface(IOSurfaceRef s) {
  protect(s, PROT_READ);
  std::vector<uint8_t> out(s->memory, s->memory + s->alloc);
  protect(s, PROT_NONE);
  return out;
}
void write_surface(IOSurfaceRef s, const uint8_t* bytes, size_t n) {
  protect(s, PROT_READ | PROT_WRITE);
  std::memcpy(s->memory, bytes, std::min(n, s->alloc));
  protect(s, PROT_NONE);
}

}  // namespace fake_ane

using fake_ane::misuse;
using fake_ane::property;

extern "C" {

// The driver asks for flat buffers: width = bytes, height 1, one byte per element, bytes per row =
// width, allocation = width, pixel format 0 (ane_plan.h surface_spec). Anything else is refused.
IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties) {
  NSDictionary* d = (NSDictionary*)properties;
  if (![d isKindOfClass:[NSDictionary class]]) {
    misuse("IOSurfaceCreate: the properties are not a dictionary");
    return nullptr;
  }
  const long long width = property(d, kIOSurfaceWidth), height = property(d, kIOSurfaceHeight),
                  element = property(d, kIOSurfaceBytesPerElement), row = property(d, kIOSurfaceBytesPerRow),
                  alloc = property(d, kIOSurfaceAllocSize), format = property(d, kIOSurfacePixelFormat);
  if (width <= 0 || height != 1 || element != 1 || row != width || alloc != width || format != 0 || [d count] != 6) {
    misuse("IOSurfaceCreate: not a flat buffer (width " + std::to_string(width) + ", height " +
           std::to_string(height) + ", bytes per element " + std::to_string(element) + ", bytes per row " +
           std::to_string(row) + ", alloc size " + std::to_string(alloc) + ", pixel format " +
           std::to_string(format) + ", " + std::to_string([d count]) + " properties)");
    return nullptr;
  }
  auto* s = new __IOSurface;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  s->alloc = size_t(alloc);
  s->mapped = (s->alloc + page - 1) / page * page;
  void* m = mmap(nullptr, s->mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    delete s;
    return nullptr;
  }
  s->memory = static_cast<uint8_t*>(m);
  std::lock_guard<std::mutex> g(fake_ane::lock());
  fake_ane::live().insert(s);
  return s;
}

kern_return_t IOSurfaceLock(IOSurfaceRef s, IOSurfaceLockOptions options, uint32_t* seed) {
  if (!fake_ane::is_surface(s)) {
    misuse("IOSurfaceLock: not a live surface");
    return 1;
  }
  if (s->locks > 0 && s->lock_options != options) {
    misuse("IOSurfaceLock: locked again with other options");
    return 1;
  }
  s->locks++;
  s->lock_options = options;
  fake_ane::protect(s, (options & 1) ? PROT_READ : PROT_READ | PROT_WRITE);  // 1: kIOSurfaceLockReadOnly
  if (seed) *seed = 0;
  return 0;
}

kern_return_t IOSurfaceUnlock(IOSurfaceRef s, IOSurfaceLockOptions options, uint32_t* seed) {
  if (!fake_ane::is_surface(s) || s->locks == 0 || s->lock_options != options) {
    misuse("IOSurfaceUnlock: the surface is not locked with these options");
    return 1;
  }
  if (--s->locks == 0) fake_ane::protect(s, PROT_NONE);
  if (seed) *seed = 0;
  return 0;
}

void* IOSurfaceGetBaseAddress(IOSurfaceRef s) { return fake_ane::is_surface(s) ? s->memory : nullptr; }
size_t IOSurfaceGetAllocSize(IOSurfaceRef s) { return fake_ane::is_surface(s) ? s->alloc : 0; }

// The driver releases only the IOSurfaces it created.
void CFRelease(CFTypeRef cf) {
  auto s = (IOSurfaceRef)cf;
  if (!fake_ane::is_surface(s)) {
    misuse("CFRelease: not a live surface (released twice?)");
    return;
  }
  if (--s->references > 0) return;
  {
    std::lock_guard<std::mutex> g(fake_ane::lock());
    fake_ane::live().erase(s);
  }
  munmap(s->memory, s->mapped);
  delete s;
}

}  // extern "C"

// For tests: a flat surface of `bytes` bytes, made as the driver makes them.
extern "C" IOSurfaceRef orion_fake_ane_create_surface(size_t bytes) {
  @autoreleasepool {
    NSDictionary* props = @{
      (id)kIOSurfaceWidth: @(bytes), (id)kIOSurfaceHeight: @1, (id)kIOSurfaceBytesPerElement: @1,
      (id)kIOSurfaceBytesPerRow: @(bytes), (id)kIOSurfaceAllocSize: @(bytes), (id)kIOSurfacePixelFormat: @0,
    };
    return IOSurfaceCreate((CFDictionaryRef)props);
  }
}
