// The fake's IOSurface (tests/ane_driver/fake/): the C functions and property keys of Apple's
// IOSurfaceRef.h that ane_driver.mm calls, over memory that can only be touched while locked.
// A surface's pages are mapped PROT_NONE except between IOSurfaceLock and IOSurfaceUnlock (read-only
// under kIOSurfaceLockReadOnly), so a driver that reads or writes a surface outside a lock faults,
// as it would race the ANE on the hardware. The "hardware" side (the fake's evaluate) reads and
// writes through fake_surface_bytes, which opens the pages for the copy only.
#pragma once
#import <Foundation/Foundation.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
typedef const void* CFTypeRef;
typedef const struct __CFString* CFStringRef;
typedef const struct __CFDictionary* CFDictionaryRef;
typedef int kern_return_t;
typedef struct __IOSurface* IOSurfaceRef;
typedef uint32_t IOSurfaceLockOptions;

void CFRelease(CFTypeRef cf);
extern const CFStringRef kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow,
    kIOSurfaceAllocSize, kIOSurfacePixelFormat;
IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties);
kern_return_t IOSurfaceLock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t* seed);
kern_return_t IOSurfaceUnlock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t* seed);
void* IOSurfaceGetBaseAddress(IOSurfaceRef buffer);
size_t IOSurfaceGetAllocSize(IOSurfaceRef buffer);
}

namespace fake_ane {

// Records a misuse the fake detected (the text tests read back) and prints it.
void misuse(const std::string& what);

bool is_surface(IOSurfaceRef s);  // made by IOSurfaceCreate and not yet freed
void retain_surface(IOSurfaceRef s);
bool surface_locked(IOSurfaceRef s);
// The "hardware" copy: the surface's whole allocation, out or in, whatever the lock state.
std::vector<uint8_t> read_surface(IOSurfaceRef s);
void write_surface(IOSurfaceRef s, const uint8_t* bytes, size_t n);

}  // namespace fake_ane
