// A fake of the private AppleNeuralEngine.framework for ctest on Linux: the four classes
// ane_driver.mm calls, on GNUstep's Foundation, computing through anesim (the software ANE).
// The driver dlopens this library through ORION_ANE_FRAMEWORK exactly as it dlopens the real one.
//
// What the fake checks, each a "misuse" it records (orion_fake_ane_last_misuse), prints and refuses:
//   descriptor  MIL as NSData, weights an NSDictionary {"@model_path/weights/<f>.bin": {offset: 0,
//               data: NSData}}, the options plist nil
//   model       QoS 21 and an empty options dictionary on every call, an error pointer; the state
//               machine created → compiled → loaded ⇄ unloaded; at compile, model.mil and every
//               weights/<f>.bin under <NSTemporaryDirectory()>/<hexStringIdentifier>/ byte-equal to
//               the descriptor's
//   request     _ANEIOSurfaceObjects of live surfaces, indices 0…n−1 for the n MIL names in
//               alphabetical order, weightsBuffer and perfStats nil, procedure index 0; surfaces
//               unlocked while the hardware runs; a request is bound to one load of one model
//   surfaces    fake_surface.mm: flat buffers, touched only while locked
// What it models of the hardware: past kCompileBudget compiles a process's compile fails silently
// (NO, no error); uneven or too-small surfaces answer status 0x1d; a reload after unload →
// rewrite weights/*.bin → load still computes with the compiled weights (stale), while a new,
// never-compiled model whose folder holds a compiled `data` file loads from that file without
// compiling (the path that takes new weights). The identifier — so the folder — is derived from
// the descriptor's contents as the framework derives it, and the compiled model is kept under it
// for every process of the user: programs that hash alike share it (hex_identifier, loadWithQoS).
// With ORION_FAKE_ANE_UNLOAD_REMOVES_FOLDER set (fake_framework_env.h), an unload removes the model's folder, as a decompiled copy
// of the framework (iOS 18.2) does; unset (the default), the folder stays, as the public M5 probes'
// successful load after an unload implies.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "fake_classes.h"
#include "fake_hardware.h"
#include "fake_surface.h"

namespace rt = orion::runtime;

namespace fake_ane {
namespace {

constexpr unsigned kQoS = 21;
constexpr int kCompileBudget = 119;
constexpr const char* kWeightsPrefix = "@model_path/weights/";
constexpr const char* kDataMagic = "FAKEANE-COMPILED\n";  // first bytes of the fake's compiled `data` file

std::mutex misuse_lock;
std::string last_misuse;
std::atomic<int> compiles{0};

NSError* failure(const std::string& text) {
  NSDictionary* info = @{NSLocalizedDescriptionKey: [NSString stringWithUTF8String:text.c_str()]};
  return [NSError errorWithDomain:@"com.apple.appleneuralengine" code:1 userInfo:info];
}
BOOL refuse(NSError** error, const std::string& text) {
  if (error) *error = failure(text);
  return NO;
}
BOOL misused(NSError** error, const std::string& text) {
  misuse(text);
  return refuse(error, "fake AppleNeuralEngine: misuse: " + text);
}

std::string bytes_of(NSData* d) { return std::string(static_cast<const char*>([d bytes]), [d length]); }
std::string text_of(NSString* s) { return s ? std::string([s UTF8String]) : std::string(); }
bool file_equals(const std::string& path, const std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return in.good() || in.eof() ? s.str() == bytes : false;
}

// FNV-1a of some bytes, as 16 hex digits (the framework's hexStringForData:, a stronger hash).
std::string hex_of(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// The identifier as the framework's descriptor derives it: "<MIL hash>_<weights hash>_<options
// hash>", the weights hash taken over, per key in sorted order, the FIRST of the entry's values
// (`[[entry allValues] firstObject]`) — for an {offset, data} entry whichever the dictionary lists
// first, here GNUstep's order. Equal programs get equal identifiers, in any process of the user.
std::string hex_identifier(NSData* mil, NSDictionary* weights, NSData* options) {
  std::string first_values;
  for (id key in [[weights allKeys] sortedArrayUsingSelector:@selector(compare:)]) {
    id first = [[[weights objectForKey:key] allValues] firstObject];
    first_values += [first isKindOfClass:[NSData class]] ? bytes_of(first) : text_of([first description]);
    first_values += '\0';
  }
  return hex_of(bytes_of(mil)) + "_" + hex_of(first_values) + "_" + hex_of(options ? bytes_of(options) : "");
}

// Every call but unload takes QoS 21, an empty options dictionary and an error pointer.
bool call_ok(const char* call, unsigned qos, NSDictionary* options, bool takes_options, NSError** error) {
  std::string why;
  if (qos != kQoS) why = std::string(call) + ": QoS " + std::to_string(qos) + ", not 21";
  else if (takes_options && (![options isKindOfClass:[NSDictionary class]] || [options count] != 0))
    why = std::string(call) + ": the options are not an empty dictionary";
  else if (!error) why = std::string(call) + ": no error pointer";
  if (why.empty()) return true;
  misused(error, why);
  return false;
}

}  // namespace

void misuse(const std::string& what) {
  std::lock_guard<std::mutex> g(misuse_lock);
  last_misuse = what;
  std::fprintf(stderr, "fake AppleNeuralEngine: misuse: %s\n", what.c_str());
}

}  // namespace fake_ane

using namespace fake_ane;

extern "C" {
// What tests read: the last misuse detected ("" when none), and a reset.
const char* orion_fake_ane_last_misuse() {
  std::lock_guard<std::mutex> g(misuse_lock);
  static thread_local std::string copy;
  copy = last_misuse;
  return copy.c_str();
}
void orion_fake_ane_clear_misuse() {
  std::lock_guard<std::mutex> g(misuse_lock);
  last_misuse.clear();
}
int orion_fake_ane_compiles() { return compiles.load(); }
}

// ---- descriptor --------------------------------------------------------------------------------------

struct FakeDescriptor {
  std::string mil;
  rt::WeightDict weights;  // key "@model_path/weights/<f>.bin" → file image
  std::string hex;         // hexStringIdentifier
};


@implementation _ANEInMemoryModelDescriptor
+ (id)modelWithMILText:(NSData*)milText weights:(NSDictionary*)weights optionsPlist:(NSData*)optionsPlist {
  std::string why;
  if (![milText isKindOfClass:[NSData class]]) why = "the MIL text is not NSData";
  else if (optionsPlist != nil) why = "the options plist is not nil";
  else if (![weights isKindOfClass:[NSDictionary class]]) why = "the weights are not a dictionary";
  if (!why.empty()) {
    misuse("modelWithMILText:weights:optionsPlist: " + why);
    return nil;
  }
  auto* d = new FakeDescriptor{bytes_of(milText), {}, hex_identifier(milText, weights, optionsPlist)};
  for (id key in weights) {
    NSDictionary* v = [weights objectForKey:key];
    const std::string k = [key isKindOfClass:[NSString class]] ? text_of(key) : "";
    if (k.rfind(kWeightsPrefix, 0) != 0 || k.size() <= std::strlen(kWeightsPrefix))
      why = "weight key '" + k + "' does not start with " + kWeightsPrefix;
    else if (![v isKindOfClass:[NSDictionary class]] || [v count] != 2)
      why = "weight '" + k + "' is not a dictionary {offset, data}";
    else if (![[v objectForKey:@"offset"] isKindOfClass:[NSNumber class]] ||
             [[v objectForKey:@"offset"] longLongValue] != 0)
      why = "weight '" + k + "' has an offset other than 0";
    else if (![[v objectForKey:@"data"] isKindOfClass:[NSData class]])
      why = "weight '" + k + "' has no NSData 'data'";
    if (!why.empty()) {
      delete d;
      misuse("modelWithMILText:weights:optionsPlist: " + why);
      return nil;
    }
    std::string bytes = bytes_of([v objectForKey:@"data"]);
    d->weights[k] = std::vector<uint8_t>(bytes.begin(), bytes.end());
  }
  _ANEInMemoryModelDescriptor* o = [[_ANEInMemoryModelDescriptor alloc] init];  // kept for the process
  o->d_ = d;
  return o;
}
@end

// ---- surface objects and requests ---------------------------------------------------------------------


@implementation _ANEIOSurfaceObject
+ (id)objectWithIOSurface:(IOSurfaceRef)surface {
  if (!is_surface(surface)) {
    misuse("objectWithIOSurface: not a live IOSurface");
    return nil;
  }
  retain_surface(surface);  // held for the process, as the object is
  _ANEIOSurfaceObject* o = [[_ANEIOSurfaceObject alloc] init];
  o->surface_ = surface;
  return o;
}
@end

struct FakeRequest {
  std::vector<IOSurfaceRef> inputs, outputs;
  std::vector<int> input_indices, output_indices;
  id model = nil;      // the model this request was first evaluated with …
  int load = -1;       // … during that model's load number `load`
};


namespace fake_ane {
namespace {

// Surfaces of an array of _ANEIOSurfaceObjects; false (and `why`) when an element is anything else.
bool surfaces_of(NSArray* objects, std::vector<IOSurfaceRef>& out, std::string& why) {
  if (![objects isKindOfClass:[NSArray class]]) return why = "the surfaces are not an array", false;
  for (id o in objects) {
    if (![o isKindOfClass:[_ANEIOSurfaceObject class]]) return why = "a surface is not an _ANEIOSurfaceObject", false;
    out.push_back(((_ANEIOSurfaceObject*)o)->surface_);
  }
  return true;
}
bool indices_of(NSArray* numbers, std::vector<int>& out, std::string& why) {
  if (![numbers isKindOfClass:[NSArray class]]) return why = "the indices are not an array", false;
  for (id n in numbers) {
    if (![n isKindOfClass:[NSNumber class]]) return why = "an index is not an NSNumber", false;
    out.push_back([n intValue]);
  }
  return true;
}

}  // namespace
}  // namespace fake_ane

@implementation _ANERequest
+ (id)requestWithInputs:(NSArray*)inputs
           inputIndices:(NSArray*)inputIndices
                outputs:(NSArray*)outputs
          outputIndices:(NSArray*)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(NSNumber*)procedureIndex {
  auto* r = new FakeRequest;
  std::string why;
  if (surfaces_of(inputs, r->inputs, why) && surfaces_of(outputs, r->outputs, why) &&
      indices_of(inputIndices, r->input_indices, why) && indices_of(outputIndices, r->output_indices, why)) {
    if (weightsBuffer != nil) why = "weightsBuffer is not nil";
    else if (perfStats != nil) why = "perfStats is not nil";
    else if (![procedureIndex isKindOfClass:[NSNumber class]] || [procedureIndex intValue] != 0)
      why = "the procedure index is not @0";
    else if (r->inputs.size() != r->input_indices.size() || r->outputs.size() != r->output_indices.size())
      why = "as many indices as surfaces are needed";
  }
  if (!why.empty()) {
    delete r;
    misuse("requestWithInputs:…: " + why);
    return nil;
  }
  _ANERequest* o = [[_ANERequest alloc] init];  // kept for the process
  o->r_ = r;
  return o;
}
@end

// ---- the model ----------------------------------------------------------------------------------------

struct FakeModel {
  enum class Phase { Created, Compiled, Loaded, Unloaded };
  const FakeDescriptor* descriptor = nullptr;
  std::string hex;
  Phase phase = Phase::Created;
  std::unique_ptr<rt::DriverProgram> program;  // anesim's, once compiled or loaded from `data`
  rt::WeightDict weights;                      // … computing with these
  int loads = 0;                               // numbers the loads, for the request check
};

namespace fake_ane {
namespace {

std::string folder_of(const FakeModel& m) { return text_of(NSTemporaryDirectory()) + "/" + m.hex; }

// The compiled `data` file: a magic line, then every weight file image in key order.
std::string compiled_data(const rt::WeightDict& weights) {
  std::string out = kDataMagic;
  for (const auto& [key, data] : weights) out.append(data.begin(), data.end());
  return out;
}
// The weights a `data` file holds, cut by the descriptor's sizes; false when it does not fit them.
bool weights_from_data(const std::string& data, const rt::WeightDict& shape, rt::WeightDict& out) {
  if (data.rfind(kDataMagic, 0) != 0) return false;
  size_t at = std::strlen(kDataMagic);
  for (const auto& [key, image] : shape) {
    if (at + image.size() > data.size()) return false;
    out[key] = std::vector<uint8_t>(data.begin() + at, data.begin() + at + image.size());
    at += image.size();
  }
  return at == data.size();
}

// The files the driver must have written before compiling, byte-equal to the descriptor.
std::string folder_mismatch(const FakeModel& m) {
  const std::string dir = folder_of(m);
  if (!file_equals(dir + "/model.mil", m.descriptor->mil)) return dir + "/model.mil differs from the MIL text";
  for (const auto& [key, image] : m.descriptor->weights) {
    const std::string path = dir + "/" + key.substr(std::strlen("@model_path/"));
    if (!file_equals(path, std::string(image.begin(), image.end()))) return path + " differs from weight '" + key + "'";
  }
  return {};
}

BOOL compile_program(FakeModel& m, const rt::WeightDict& weights, NSError** error) {
  HardwareAnswer a = hardware_compile(m.descriptor->mil, weights, m.hex, m.program);
  if (!a.error.empty()) return refuse(error, "_ANECompiler : ANECCompile() FAILED: " + a.error);
  m.weights = weights;
  return YES;
}

// The weights of the compiled model in the model's folder (its `data` file); false when there is none.
bool compiled_weights(const FakeModel& m, rt::WeightDict& weights) {
  std::ifstream in(folder_of(m) + "/data", std::ios::binary);
  std::stringstream data;
  data << in.rdbuf();
  return in && weights_from_data(data.str(), m.descriptor->weights, weights);
}

}  // namespace
}  // namespace fake_ane


@implementation _ANEInMemoryModel
+ (id)inMemoryModelWithDescriptor:(id)descriptor {
  if (![descriptor isKindOfClass:[_ANEInMemoryModelDescriptor class]]) {
    misuse("inMemoryModelWithDescriptor: not a descriptor");
    return nil;
  }
  auto* m = new FakeModel;
  m->descriptor = ((_ANEInMemoryModelDescriptor*)descriptor)->d_;
  m->hex = m->descriptor->hex;
  _ANEInMemoryModel* o = [[_ANEInMemoryModel alloc] init];  // kept for the process
  o->m_ = m;
  return o;
}

- (NSString*)hexStringIdentifier {
  return [NSString stringWithUTF8String:m_->hex.c_str()];
}

- (BOOL)compileWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error {
  if (!call_ok("compileWithQoS:options:error:", qos, options, true, error)) return NO;
  if (m_->phase != FakeModel::Phase::Created) return misused(error, "compile of a model already compiled");
  if (++compiles > kCompileBudget) return NO;  // the hardware's silent failure past the budget (C9)
  if (std::string why = folder_mismatch(*m_); !why.empty()) return misused(error, "compile: " + why);
  if (!compile_program(*m_, m_->descriptor->weights, error)) return NO;
  std::ofstream(folder_of(*m_) + "/data", std::ios::binary) << compiled_data(m_->descriptor->weights);
  m_->phase = FakeModel::Phase::Compiled;
  return YES;
}

// Every load loads the compiled model kept under the model's identifier — the `data` file of its
// folder, the fake's stand-in for the compiled-model store the framework keys by that identifier
// and shares between the user's processes. So weights/*.bin rewritten since the compile are not
// read (the stale reload); a never-compiled model loads from a `data` file written for it; and a
// model whose identifier another model shares loads whatever that one's delta reload left there.
- (BOOL)loadWithQoS:(unsigned int)qos options:(NSDictionary*)options error:(NSError**)error {
  if (!call_ok("loadWithQoS:options:error:", qos, options, true, error)) return NO;
  if (m_->phase == FakeModel::Phase::Loaded) return misused(error, "load of a model already loaded");
  rt::WeightDict weights;
  if (!compiled_weights(*m_, weights)) {
    if (m_->phase == FakeModel::Phase::Created)
      return misused(error, "load of a model neither compiled nor with a compiled data file in " + folder_of(*m_));
    return refuse(error, "loadModel: no compiled model in " + folder_of(*m_) + " (removed since the compile)");
  }
  if (m_->phase == FakeModel::Phase::Created || weights != m_->weights)
    if (!compile_program(*m_, weights, error)) return NO;
  if (HardwareAnswer a = hardware_load(*m_->program); !a.error.empty()) return refuse(error, a.error);
  m_->phase = FakeModel::Phase::Loaded;
  m_->loads++;
  return YES;
}

- (BOOL)unloadWithQoS:(unsigned int)qos error:(NSError**)error {
  if (!call_ok("unloadWithQoS:error:", qos, nil, false, error)) return NO;
  if (m_->phase != FakeModel::Phase::Loaded) return misused(error, "unload of a model that is not loaded");
  if (HardwareAnswer a = hardware_unload(*m_->program); !a.error.empty()) return refuse(error, a.error);
  m_->phase = FakeModel::Phase::Unloaded;
  if (std::getenv("ORION_FAKE_ANE_UNLOAD_REMOVES_FOLDER")) {  // the decompiled iOS 18.2 framework's unload
    std::error_code ec;
    std::filesystem::remove_all(folder_of(*m_), ec);
  }
  return YES;
}

- (BOOL)evaluateWithQoS:(unsigned int)qos options:(NSDictionary*)options request:(id)request error:(NSError**)error {
  if (!call_ok("evaluateWithQoS:options:request:error:", qos, options, true, error)) return NO;
  if (m_->phase != FakeModel::Phase::Loaded) return misused(error, "evaluate of a model that is not loaded");
  if (![request isKindOfClass:[_ANERequest class]]) return misused(error, "evaluate: the request is not an _ANERequest");
  FakeRequest& r = *((_ANERequest*)request)->r_;
  if (r.model != nil && (r.model != self || r.load != m_->loads))
    return misused(error, "evaluate: a request made for another load of a model (requests do not survive unload)");
  r.model = self;
  r.load = m_->loads;
  const auto& in_names = m_->program->input_names();
  const auto& out_names = m_->program->output_names();
  auto counting = [](size_t n) {
    std::vector<int> v(n);
    for (size_t i = 0; i < n; i++) v[i] = int(i);
    return v;
  };
  if (r.input_indices != counting(in_names.size()) || r.output_indices != counting(out_names.size()))
    return misused(error, "evaluate: the indices are not 0…n−1 over the alphabetical MIL names");
  std::vector<rt::Surface> ins, outs;
  auto gather = [&](const std::vector<IOSurfaceRef>& from, std::vector<rt::Surface>& to) {
    for (IOSurfaceRef s : from) {
      if (!is_surface(s) || surface_locked(s)) return false;
      std::vector<uint8_t> bytes = read_surface(s);
      to.emplace_back(bytes.size());
      std::memcpy(to.back().data(), bytes.data(), bytes.size());
    }
    return true;
  };
  if (!gather(r.inputs, ins) || !gather(r.outputs, outs))
    return misused(error, "evaluate: a surface is freed or still locked");
  if (HardwareAnswer a = hardware_evaluate(*m_->program, ins, outs); !a.error.empty()) {
    if (a.bad_surfaces)  // as the hardware words it
      return refuse(error, "ANEProgramProcessRequestDirect() Failed with status=0x1d : statusType=0x9: "
                           "Program Inference error (" + a.error + ")");
    return refuse(error, a.error);
  }
  for (size_t i = 0; i < outs.size(); i++) write_surface(r.outputs[i], outs[i].data(), outs[i].alloc_bytes());
  return YES;
}
@end
