// The Apple driver's Objective-C half: the calls into the private AppleNeuralEngine.framework
// (DESIGN.md §3) behind the Framework interface of ane_framework.h, and make_ane_driver. Every
// decision — weight-dictionary keys, the model folder, binding order, surface sizes, statuses — is
// made in ane_plan.cpp / ane_core.cpp, which are tested on every machine; this file only talks to
// the framework. Built on macOS with -fobjc-arc, into orion. On Linux (ORION_ANE_FAKE) it is built
// with manual reference counting against GNUstep into a loadable module of its own (the end of this
// file; ane_module.cpp loads it) and runs in ctest against a fake of the framework that checks
// every call (tests/ane_driver/), so it may rely on no ARC-only behaviour: objects it keeps are
// ones the framework keeps alive. CI also compiles it for syntax and types under ARC
// (scripts/check_ane_driver_syntax.sh). The private classes, and off Apple the few CoreFoundation /
// IOSurface names, are declared here.
#import <Foundation/Foundation.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/ane/ane_core.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_framework.h"

#if defined(__APPLE__)
#include <CoreFoundation/CoreFoundation.h>
#include <IOSurface/IOSurfaceRef.h>
#else
// Off macOS there is neither CoreFoundation nor IOSurface: the driver runs against the test fake of
// the framework (ORION_ANE_FAKE, tests/ane_driver/fake/), which provides these names too, with the
// signatures of Apple's headers. They are looked up in the loaded library (bind_surface_api), so
// nothing here links against the fake; the CI syntax check compiles this branch as well.
typedef const void* CFTypeRef;
typedef const struct __CFString* CFStringRef;
typedef const struct __CFDictionary* CFDictionaryRef;
typedef int kern_return_t;
typedef struct __IOSurface* IOSurfaceRef;
typedef uint32_t IOSurfaceLockOptions;
enum : uint32_t { kIOSurfaceLockReadOnly = 0x00000001 };
namespace {
void (*CFRelease)(CFTypeRef cf);
IOSurfaceRef (*IOSurfaceCreate)(CFDictionaryRef properties);
kern_return_t (*IOSurfaceLock)(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t* seed);
kern_return_t (*IOSurfaceUnlock)(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t* seed);
void* (*IOSurfaceGetBaseAddress)(IOSurfaceRef buffer);
size_t (*IOSurfaceGetAllocSize)(IOSurfaceRef buffer);
CFStringRef kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow, kIOSurfaceAllocSize,
    kIOSurfacePixelFormat;

// Fills the names above from the loaded library; returns the first one it lacks, or "".
std::string bind_surface_api(void* library) {
  std::string lacking;
  auto find = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
    if (!fn && lacking.empty()) lacking = name;
  };
  auto constant = [&](CFStringRef& value, const char* name) {
    auto* address = static_cast<const CFStringRef*>(dlsym(library, name));
    value = address ? *address : nullptr;
    if (!value && lacking.empty()) lacking = name;
  };
  find(CFRelease, "CFRelease");
  find(IOSurfaceCreate, "IOSurfaceCreate");
  find(IOSurfaceLock, "IOSurfaceLock");
  find(IOSurfaceUnlock, "IOSurfaceUnlock");
  find(IOSurfaceGetBaseAddress, "IOSurfaceGetBaseAddress");
  find(IOSurfaceGetAllocSize, "IOSurfaceGetAllocSize");
  constant(kIOSurfaceWidth, "kIOSurfaceWidth");
  constant(kIOSurfaceHeight, "kIOSurfaceHeight");
  constant(kIOSurfaceBytesPerElement, "kIOSurfaceBytesPerElement");
  constant(kIOSurfaceBytesPerRow, "kIOSurfaceBytesPerRow");
  constant(kIOSurfaceAllocSize, "kIOSurfaceAllocSize");
  constant(kIOSurfacePixelFormat, "kIOSurfacePixelFormat");
  return lacking;
}
}  // namespace
#endif

// ---- the private classes: only the methods Orion calls ---------------------------------------------
// They live in the dlopen'ed framework, so they are never named as receivers (that would link
// against them): their Class objects come from NSClassFromString.
@interface _ANEInMemoryModelDescriptor : NSObject
+ (id)modelWithMILText:(NSData*)milText weights:(NSDictionary*)weights optionsPlist:(NSData*)optionsPlist;
@end

@interface _ANEInMemoryModel : NSObject
+ (id)inMemoryModelWithDescriptor:(id)descriptor;
- (NSString*)hexStringIdentifier;
- (BOOL)compileWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error;
- (BOOL)loadWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error;
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(NSDictionary*)options request:(id)request error:(NSError**)error;
- (BOOL)unloadWithQoS:(unsigned int)qos error:(NSError**)error;
@end

@interface _ANEIOSurfaceObject : NSObject
+ (id)objectWithIOSurface:(IOSurfaceRef)surface;
@end

@interface _ANERequest : NSObject
+ (id)requestWithInputs:(NSArray*)inputs
           inputIndices:(NSArray*)inputIndices
                outputs:(NSArray*)outputs
          outputIndices:(NSArray*)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(NSNumber*)procedureIndex;
@end

namespace orion::runtime {
namespace ane {
namespace {

struct Classes {
  Class descriptor = Nil, model = Nil, io_surface = Nil, request = Nil;
  bool off_macos = false;  // no framework here and no fake named: the platform's NotAvailable
  std::string missing;     // why the framework cannot be used; "" when it can
};

// dlopen the framework once per process — or the fake named by kFrameworkPathEnv — and check that
// every class and selector Orion calls exists (they are private: a macOS update may rename them).
const Classes& classes() {
  static const Classes c = [] { @autoreleasepool {
    Classes r;
    const char* named = std::getenv(kFrameworkPathEnv);
    const std::string path = named && *named ? named : kFrameworkPath;
#if !defined(__APPLE__)
    if (!named || !*named) {
      r.off_macos = true;
      return r;
    }
#endif
    void* library = dlopen(path.c_str(), RTLD_NOW);
    if (!library) {
      const char* why = dlerror();
      r.missing = "cannot load " + path + ": " + (why ? why : "unknown reason");
      return r;
    }
#if !defined(__APPLE__)
    if (std::string lacking = bind_surface_api(library); !lacking.empty()) {
      r.missing = path + " lacks " + lacking;
      return r;
    }
#endif
    r.descriptor = NSClassFromString(@"_ANEInMemoryModelDescriptor");
    r.model = NSClassFromString(@"_ANEInMemoryModel");
    r.io_surface = NSClassFromString(@"_ANEIOSurfaceObject");
    r.request = NSClassFromString(@"_ANERequest");
    auto need = [&](bool ok, const char* what) {
      if (!ok && r.missing.empty()) r.missing = std::string("the framework lacks ") + what;
    };
    need(r.descriptor && [r.descriptor respondsToSelector:@selector(modelWithMILText:weights:optionsPlist:)],
         "+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]");
    need(r.model && [r.model respondsToSelector:@selector(inMemoryModelWithDescriptor:)],
         "+[_ANEInMemoryModel inMemoryModelWithDescriptor:]");
    need(r.model && [r.model instancesRespondToSelector:@selector(hexStringIdentifier)],
         "-[_ANEInMemoryModel hexStringIdentifier]");
    need(r.model && [r.model instancesRespondToSelector:@selector(compileWithQoS:options:error:)],
         "-[_ANEInMemoryModel compileWithQoS:options:error:]");
    need(r.model && [r.model instancesRespondToSelector:@selector(loadWithQoS:options:error:)],
         "-[_ANEInMemoryModel loadWithQoS:options:error:]");
    need(r.model && [r.model instancesRespondToSelector:@selector(evaluateWithQoS:options:request:error:)],
         "-[_ANEInMemoryModel evaluateWithQoS:options:request:error:]");
    need(r.model && [r.model instancesRespondToSelector:@selector(unloadWithQoS:error:)],
         "-[_ANEInMemoryModel unloadWithQoS:error:]");
    need(r.io_surface && [r.io_surface respondsToSelector:@selector(objectWithIOSurface:)],
         "+[_ANEIOSurfaceObject objectWithIOSurface:]");
    need(r.request && [r.request respondsToSelector:@selector(requestWithInputs:inputIndices:outputs:outputIndices:
                                                                  weightsBuffer:perfStats:procedureIndex:)],
         "+[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:procedureIndex:]");
    return r;
  } }();
  return c;
}

std::string describe(NSError* error) {
  if (!error) return {};
  const char* s = [[error description] UTF8String];
  return s ? s : "";
}

NSString* ns_string(const std::string& s) { return [NSString stringWithUTF8String:s.c_str()]; }

// A flat IOSurface: width = bytes, height 1, one byte per element (surface_spec).
IOSurfaceRef create_surface(size_t bytes) {
  SurfaceSpec s = surface_spec(bytes);
  NSDictionary* props = @{
    (__bridge id)kIOSurfaceWidth: @(s.width),
    (__bridge id)kIOSurfaceHeight: @(s.height),
    (__bridge id)kIOSurfaceBytesPerElement: @(s.bytes_per_element),
    (__bridge id)kIOSurfaceBytesPerRow: @(s.bytes_per_row),
    (__bridge id)kIOSurfaceAllocSize: @(s.alloc_size),
    (__bridge id)kIOSurfacePixelFormat: @(s.pixel_format),
  };
  return IOSurfaceCreate((__bridge CFDictionaryRef)props);
}

// The IOSurfaces and the _ANERequest of one model, kept while the caller's surface sizes stay the same.
struct Bound {
  std::vector<IOSurfaceRef> inputs, outputs;
  std::vector<size_t> input_bytes, output_bytes;
  std::vector<int> input_indices, output_indices;
  id request = nil;

  void release() {
    request = nil;
    for (IOSurfaceRef s : inputs) CFRelease(s);
    for (IOSurfaceRef s : outputs) CFRelease(s);
    inputs.clear();
    outputs.clear();
  }
};

class MacModel final : public FrameworkModel {
 public:
  explicit MacModel(_ANEInMemoryModel* model) : model_(model) {}
  ~MacModel() override { bound_.release(); }

  std::string hex_identifier() override {
    @autoreleasepool {
      const char* s = [[model_ hexStringIdentifier] UTF8String];
      return s ? s : "";
    }
  }
  CallResult compile(unsigned qos) override {
    @autoreleasepool {
      NSError* error = nil;
      if ([model_ compileWithQoS:qos options:@{} error:&error]) return {};
      return CallResult::failure(describe(error));
    }
  }
  CallResult load(unsigned qos) override {
    @autoreleasepool {
      NSError* error = nil;
      if ([model_ loadWithQoS:qos options:@{} error:&error]) return {};
      return CallResult::failure(describe(error));
    }
  }
  CallResult unload(unsigned qos) override {
    @autoreleasepool {
      NSError* error = nil;
      const BOOL ok = [model_ unloadWithQoS:qos error:&error];
      // The request and its surface objects belong to one load of the model: the next load binds
      // anew (evaluate rebuilds them), as every working reference does.
      bound_.release();
      if (ok) return {};
      return CallResult::failure(describe(error));
    }
  }
  CallResult evaluate(unsigned qos, const std::vector<Surface*>& inputs, const std::vector<int>& input_indices,
                      const std::vector<Surface*>& outputs, const std::vector<int>& output_indices) override {
    @autoreleasepool {
      if (std::string why = bind(inputs, input_indices, outputs, output_indices); !why.empty())
        return CallResult::failure(why);
      for (size_t i = 0; i < inputs.size(); i++)  // C14: packed data from byte 0, whole allocation
        if (!copy(bound_.inputs[i], inputs[i]->data(), inputs[i]->alloc_bytes(), true))
          return CallResult::failure("cannot lock an input IOSurface");
      NSError* error = nil;
      if (![model_ evaluateWithQoS:qos options:@{} request:bound_.request error:&error])
        return CallResult::failure(describe(error));
      for (size_t i = 0; i < outputs.size(); i++)
        if (!copy(bound_.outputs[i], outputs[i]->data(), outputs[i]->alloc_bytes(), false))
          return CallResult::failure("cannot lock an output IOSurface");
      return {};
    }
  }

 private:
  static std::vector<size_t> sizes(const std::vector<Surface*>& v) {
    std::vector<size_t> s;
    for (const Surface* x : v) s.push_back(x->alloc_bytes());
    return s;
  }

  static NSArray* wrap(const std::vector<IOSurfaceRef>& surfaces) {
    NSMutableArray* a = [NSMutableArray arrayWithCapacity:surfaces.size()];
    for (IOSurfaceRef s : surfaces) {
      id o = [classes().io_surface objectWithIOSurface:s];
      if (!o) return nil;
      [a addObject:o];
    }
    return a;
  }
  static NSArray* numbers(const std::vector<int>& v) {
    NSMutableArray* a = [NSMutableArray arrayWithCapacity:v.size()];
    for (int i : v) [a addObject:@(i)];
    return a;
  }

  // (Re)creates the IOSurfaces and the request when the caller's sizes or indices changed.
  std::string bind(const std::vector<Surface*>& inputs, const std::vector<int>& input_indices,
                   const std::vector<Surface*>& outputs, const std::vector<int>& output_indices) {
    std::vector<size_t> in_bytes = sizes(inputs), out_bytes = sizes(outputs);
    if (bound_.request && in_bytes == bound_.input_bytes && out_bytes == bound_.output_bytes &&
        input_indices == bound_.input_indices && output_indices == bound_.output_indices)
      return {};
    bound_.release();
    for (size_t b : in_bytes) {
      IOSurfaceRef s = create_surface(b);
      if (!s) return "IOSurfaceCreate failed for an input of " + std::to_string(b) + " bytes";
      bound_.inputs.push_back(s);
    }
    for (size_t b : out_bytes) {
      IOSurfaceRef s = create_surface(b);
      if (!s) return "IOSurfaceCreate failed for an output of " + std::to_string(b) + " bytes";
      bound_.outputs.push_back(s);
    }
    NSArray* in_objects = wrap(bound_.inputs);
    NSArray* out_objects = wrap(bound_.outputs);
    if (!in_objects || !out_objects) return "_ANEIOSurfaceObject objectWithIOSurface: returned nil";
    // C6: object i is bound at index i, the i-th MIL name in alphabetical order.
    bound_.request = [classes().request requestWithInputs:in_objects
                                             inputIndices:numbers(input_indices)
                                                  outputs:out_objects
                                            outputIndices:numbers(output_indices)
                                            weightsBuffer:nil
                                                perfStats:nil
                                           procedureIndex:@0];
    if (!bound_.request) return "_ANERequest requestWithInputs:… returned nil";
    bound_.input_bytes = in_bytes;
    bound_.output_bytes = out_bytes;
    bound_.input_indices = input_indices;
    bound_.output_indices = output_indices;
    return {};
  }

  static bool copy(IOSurfaceRef s, uint8_t* host, size_t bytes, bool to_surface) {
    IOSurfaceLockOptions mode = to_surface ? 0 : kIOSurfaceLockReadOnly;
    if (IOSurfaceLock(s, mode, nullptr) != 0) return false;
    void* base = IOSurfaceGetBaseAddress(s);
    if (to_surface) std::memcpy(base, host, bytes);
    else std::memcpy(host, base, bytes);
    IOSurfaceUnlock(s, mode, nullptr);
    return true;
  }

  _ANEInMemoryModel* model_;
  Bound bound_;
};

class MacFramework final : public Framework {
 public:
  std::unique_ptr<FrameworkModel> create_model(const std::string& mil_utf8,
                                               const std::vector<WeightEntry>& weights) override {
    @autoreleasepool {
      // C19: the MIL text as UTF-8 bytes (checked by check_mil_utf8), the weight dictionary empty —
      // never nil — when the program has no weights.
      NSData* mil = [NSData dataWithBytes:mil_utf8.data() length:mil_utf8.size()];
      NSMutableDictionary* dict = [NSMutableDictionary dictionaryWithCapacity:weights.size()];
      for (const WeightEntry& e : weights) {
        NSData* data = [NSData dataWithBytes:e.data->data() length:e.data->size()];
        [dict setObject:@{ns_string(kWeightOffsetKey): @(e.offset), ns_string(kWeightDataKey): data}
                 forKey:ns_string(e.key)];  // a message, not dict[key]: GCC's runtime has no subscripting
      }
      id descriptor = [classes().descriptor modelWithMILText:mil weights:dict optionsPlist:nil];
      if (!descriptor) return nullptr;
      _ANEInMemoryModel* model = [classes().model inMemoryModelWithDescriptor:descriptor];
      if (!model) return nullptr;
      return std::make_unique<MacModel>(model);
    }
  }
  std::string temp_dir() override {
    @autoreleasepool {
      const char* s = [NSTemporaryDirectory() UTF8String];
      return s ? s : "/tmp";
    }
  }
};

}  // namespace

#if defined(__APPLE__)
std::shared_ptr<Framework> framework_connection() {
  const Classes& c = classes();
  if (!c.missing.empty())
    throw DriverError(DriverStatus::NotAvailable, "the 'ane' driver is not available on this Mac: " + c.missing,
                      "use --backend anesim (the software ANE) or --backend cpu");
  // One connection per process, shared by every driver: the compile budget (C9) is the process's.
  static const std::shared_ptr<Framework> connection = std::make_shared<MacFramework>();
  return connection;
}
#endif
}  // namespace ane

#if defined(__APPLE__)
std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options) {
  return std::make_unique<ane::AneDriver>(ane::framework_connection(), options);
}
#endif

}  // namespace orion::runtime

#if !defined(__APPLE__)
// Off macOS this file is the loadable driver module (kDriverModuleEnv; ane_module.cpp opens it), so
// orion itself links no Objective-C runtime. Its one entry answers instead of throwing: a C++
// exception is not to cross from the module into its loader.
extern "C" __attribute__((visibility("default"))) bool orion_ane_driver_module_connect(
    std::shared_ptr<orion::runtime::ane::Framework>* connection, std::string* why) {
  using namespace orion::runtime::ane;
  const Classes& c = classes();
  if (c.off_macos || !c.missing.empty()) {
    *why = c.off_macos ? std::string(kFrameworkPathEnv) + " names no framework" : c.missing;
    return false;
  }
  // One connection per process, shared by every driver: the compile budget (C9) is the process's.
  static const std::shared_ptr<Framework> shared = std::make_shared<MacFramework>();
  *connection = shared;
  return true;
}
#endif
