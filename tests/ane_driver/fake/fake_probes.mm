// Misuses the Apple driver cannot be made to commit through its Framework interface — the values it
// hard-codes (nil options plist, MIL as NSData, empty options, nil weightsBuffer and perfStats,
// procedure 0, flat surfaces) and the request it rebuilds at each load — committed here by a client
// of the fake's classes, so tests/ane_driver/test_misuse.cpp sees the fake refuse each of them.
// orion_fake_ane_probe returns the misuse the fake recorded ("" when it recorded none).
#include <fstream>
#include <string>

#include "fake_classes.h"

extern "C" const char* orion_fake_ane_last_misuse();
extern "C" void orion_fake_ane_clear_misuse();
extern "C" IOSurfaceRef orion_fake_ane_create_surface(size_t bytes);

namespace {

NSData* data_of(const std::string& s) { return [NSData dataWithBytes:s.data() length:s.size()]; }

id request_with(id weights_buffer, id perf_stats, NSNumber* procedure) {
  return [NSClassFromString(@"_ANERequest") requestWithInputs:@[] inputIndices:@[] outputs:@[] outputIndices:@[]
                                                weightsBuffer:weights_buffer perfStats:perf_stats
                                               procedureIndex:procedure];
}

// A weight-free model of `mil`, compiled and loaded as the driver does it (model.mil written first).
id loaded_model(const std::string& mil) {
  id d = [NSClassFromString(@"_ANEInMemoryModelDescriptor") modelWithMILText:data_of(mil) weights:@{} optionsPlist:nil];
  id m = [NSClassFromString(@"_ANEInMemoryModel") inMemoryModelWithDescriptor:d];
  NSString* dir = [NSString stringWithFormat:@"%@/%@", NSTemporaryDirectory(), [m hexStringIdentifier]];
  [[NSFileManager defaultManager] createDirectoryAtPath:dir withIntermediateDirectories:YES attributes:nil error:nullptr];
  std::ofstream([[dir stringByAppendingString:@"/model.mil"] UTF8String], std::ios::binary) << mil;
  NSError* e = nil;
  if (![m compileWithQoS:21 options:@{} error:&e] || ![m loadWithQoS:21 options:@{} error:&e]) return nil;
  return m;
}

// Evaluates one request across an unload and a load of the model: the driver makes a new one.
void reuse_request_across_reload(const std::string& mil, size_t in_bytes, size_t out_bytes) {
  id m = loaded_model(mil);
  if (!m) return;
  id in = [NSClassFromString(@"_ANEIOSurfaceObject") objectWithIOSurface:orion_fake_ane_create_surface(in_bytes)];
  id out = [NSClassFromString(@"_ANEIOSurfaceObject") objectWithIOSurface:orion_fake_ane_create_surface(out_bytes)];
  id r = [NSClassFromString(@"_ANERequest") requestWithInputs:@[in] inputIndices:@[@0] outputs:@[out]
                                                outputIndices:@[@0] weightsBuffer:nil perfStats:nil
                                               procedureIndex:@0];
  NSError* e = nil;
  [m evaluateWithQoS:21 options:@{} request:r error:&e];
  [m unloadWithQoS:21 error:&e];
  [m loadWithQoS:21 options:@{} error:&e];
  [m evaluateWithQoS:21 options:@{} request:r error:&e];
  [m unloadWithQoS:21 error:&e];
}

}  // namespace

// `which`: "plist", "mil_string", "options", "weights_buffer", "perf_stats", "procedure",
// "surface_shape", or "request_reuse" (then `mil` is a weight-free program of one input and one
// output of in_bytes / out_bytes).
extern "C" const char* orion_fake_ane_probe(const char* which, const char* mil, size_t in_bytes, size_t out_bytes) {
  @autoreleasepool {
    orion_fake_ane_clear_misuse();
    const std::string w = which;
    Class descriptor = NSClassFromString(@"_ANEInMemoryModelDescriptor");
    if (w == "plist") {
      [descriptor modelWithMILText:data_of("x") weights:@{} optionsPlist:[NSData data]];
    } else if (w == "mil_string") {
      [descriptor modelWithMILText:(NSData*)@"x" weights:@{} optionsPlist:nil];
    } else if (w == "options") {
      id m = [NSClassFromString(@"_ANEInMemoryModel")
          inMemoryModelWithDescriptor:[descriptor modelWithMILText:data_of("x") weights:@{} optionsPlist:nil]];
      NSError* e = nil;
      [m compileWithQoS:21 options:@{@"kANEFModelType": @"x"} error:&e];
    } else if (w == "weights_buffer") {
      request_with([[NSObject alloc] init], nil, @0);
    } else if (w == "perf_stats") {
      request_with(nil, [[NSObject alloc] init], @0);
    } else if (w == "procedure") {
      request_with(nil, nil, @1);
    } else if (w == "surface_shape") {
      NSDictionary* props = @{(id)kIOSurfaceWidth: @64, (id)kIOSurfaceHeight: @2, (id)kIOSurfaceBytesPerElement: @1,
                              (id)kIOSurfaceBytesPerRow: @64, (id)kIOSurfaceAllocSize: @128,
                              (id)kIOSurfacePixelFormat: @0};
      IOSurfaceCreate((CFDictionaryRef)props);
    } else if (w == "request_reuse") {
      reuse_request_across_reload(mil, in_bytes, out_bytes);
    }
    return orion_fake_ane_last_misuse();
  }
}
