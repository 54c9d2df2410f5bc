// The fake framework's four classes (fake_framework.mm implements them; fake_probes.mm calls them as
// a misbehaving client would). Each object points at its C++ state; objects the fake hands out are
// kept for the process (the driver here has no ARC to own them).
#pragma once
#import <Foundation/Foundation.h>

#include "fake_surface.h"

struct FakeDescriptor;
struct FakeModel;
struct FakeRequest;

@interface _ANEInMemoryModelDescriptor : NSObject {
 @public
  FakeDescriptor* d_;
}
+ (id)modelWithMILText:(NSData*)milText weights:(NSDictionary*)weights optionsPlist:(NSData*)optionsPlist;
@end

@interface _ANEIOSurfaceObject : NSObject {
 @public
  IOSurfaceRef surface_;
}
+ (id)objectWithIOSurface:(IOSurfaceRef)surface;
@end

@interface _ANERequest : NSObject {
 @public
  FakeRequest* r_;
}
+ (id)requestWithInputs:(NSArray*)inputs
           inputIndices:(NSArray*)inputIndices
                outputs:(NSArray*)outputs
          outputIndices:(NSArray*)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(NSNumber*)procedureIndex;
@end

@interface _ANEInMemoryModel : NSObject {
 @public
  FakeModel* m_;
}
+ (id)inMemoryModelWithDescriptor:(id)descriptor;
- (NSString*)hexStringIdentifier;
- (BOOL)compileWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error;
- (BOOL)loadWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error;
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(NSDictionary*)options request:(id)request error:(NSError**)error;
- (BOOL)unloadWithQoS:(unsigned int)qos error:(NSError**)error;
@end
