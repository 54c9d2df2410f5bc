// The Apple driver's decisions, in plain C++ so they are tested on every machine: what the private
// AppleNeuralEngine.framework is handed (DESIGN.md §3) and how its answers become DriverErrors.
// ane_driver.mm (macOS only) makes the Objective-C calls and nothing else; every rule it honours is
// computed here:
//   weight dictionary   "@model_path/weights/<file>.bin" → {offset: 0, data: <MILBlob v2 image>},
//                       an empty dictionary (never nil) for a weight-free program          (C19)
//   MIL text            UTF-8 bytes, checked before the framework sees them                (C19)
//   model folder        <tmp>/<hexStringIdentifier>/model.mil and …/weights/<file>.bin, the files
//                       the framework compiles from and a delta reload overwrites          (C10)
//   model identity      every model's MIL text salted for this process and model, so no
//                       two models, in any process of the user, share a folder (kModelSaltKey)
//   bindings            inputs and outputs in alphabetical order of their MIL names, with
//                       request indices 0…n−1 in that order                                (C6)
//   surfaces            flat IOSurfaces (width = bytes, height 1, 1 byte per element), one
//                       allocation size per side (C5, C13), at least the chip minimum (C7), the
//                       packed data fitting from byte 0 (C14)
//   statuses            "status=0x1d" in a framework error → DriverStatus::BadSurfaces; a compile
//                       failure past the chip's budget names C9
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/chip.h"
#include "compiler/program.h"
#include "runtime/driver.h"

namespace orion::runtime::ane {

// ---- facts of the private framework ------------------------------------------------------------
inline constexpr const char* kFrameworkPath =
    "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework/AppleNeuralEngine";
inline constexpr unsigned kQoS = 21;                             // compile / load / evaluate / unload QoS
inline constexpr const char* kModelPathPrefix = "@model_path/";  // what BLOBFILE paths start with
inline constexpr const char* kMilFileName = "model.mil";
inline constexpr const char* kWeightsDirName = "weights";
// Keys of one weight dictionary value: {kWeightOffsetKey: 0, kWeightDataKey: NSData}.
inline constexpr const char* kWeightOffsetKey = "offset";
inline constexpr const char* kWeightDataKey = "data";
// Tests point the driver at a fake of the framework with this environment variable (off macOS it is
// the only framework there is; tests/ane_driver/).
inline constexpr const char* kFrameworkPathEnv = "ORION_ANE_FRAMEWORK";
// Off macOS the driver's Objective-C half is a loadable module of its own (liborion_ane_driver.so,
// built with ORION_ANE_FAKE for the tests, linking GNUstep), opened from the path this names when
// kFrameworkPathEnv is set — so the orion binary itself links no Objective-C runtime. The module's
// one entry point: bool kDriverModuleEntry(std::shared_ptr<Framework>* connection, std::string* why).
inline constexpr const char* kDriverModuleEnv = "ORION_ANE_DRIVER_MODULE";
inline constexpr const char* kDriverModuleEntry = "orion_ane_driver_module_connect";
inline constexpr int kLoadAttempts = 2;  // a load may fail while the ANE reclaims a slot
inline constexpr int kLoadRetryDelayMs = 100;

// ---- weight dictionary (C19) -------------------------------------------------------------------
struct WeightEntry {
  std::string key;                             // "@model_path/weights/wq.bin": dictionary key = BLOBFILE path
  std::string relative_path;                   // "weights/wq.bin": where the file lives under the model folder
  uint64_t offset = 0;                         // the value's "offset": the data is the whole blob file image
  const std::vector<uint8_t>* data = nullptr;  // the MILBlob v2 image (owned by the WeightDict)
};

// One entry per weight file, in key order. Throws DriverError(CompileFailed) naming the key when
// it does not start with "@model_path/weights/" or would leave the model folder ("..", "//",
// absolute, backslash, NUL). An empty dictionary gives no entries (and an empty, non-nil NSDictionary).
std::vector<WeightEntry> plan_weight_entries(const WeightDict& weights, const std::string& program);

// ---- MIL text (C19) ----------------------------------------------------------------------------
// The byte offset of the first byte that is not valid UTF-8 (overlong forms, surrogates and code
// points above U+10FFFF included), or nullopt when the whole text is valid.
std::optional<size_t> first_invalid_utf8(const std::string& text);
// Throws DriverError(CompileFailed) naming the offset when the text is not UTF-8.
void check_mil_utf8(const std::string& mil_text, const std::string& program);

// ---- the model folder --------------------------------------------------------------------------
struct ModelDir {
  std::string root;         // <tmp>/<hexStringIdentifier>
  std::string mil_path;     // <root>/model.mil
  std::string weights_dir;  // <root>/weights
  std::string path_of(const WeightEntry& e) const { return root + "/" + e.relative_path; }
};
// Throws DriverError(CompileFailed) when the identifier is empty or not one path component.
ModelDir model_dir_layout(const std::string& tmp_dir, const std::string& hex_identifier);
// Writes model.mil and every weight file (each crash-safely), creating the folders.
void write_model_dir(const ModelDir& dir, const std::string& mil_text, const std::vector<WeightEntry>& weights);
// Overwrites the weight files only.
void write_weight_files(const ModelDir& dir, const std::vector<WeightEntry>& weights);

// ---- the delta reload (C10) -------------------------------------------------------------------
// unload → rewrite weights/*.bin → load leaves the old weights: the descriptor keeps them in memory.
// What takes new weights without a compile is a new descriptor and model for them, loaded (never
// compiled) from a folder that holds the compiled model's `data` file with the weights patched in.
inline constexpr const char* kCompiledDataFileName = "data";
// `data` with every weight's blob data replaced: each MILBlob data segment of the old images is
// found in `data` (in key order, each after the previous one) and overwritten with the same segment
// of the new image. `old_images` and `new_images` pair up by index. Throws DriverError(LoadFailed)
// naming the weight file when a segment is missing from `data` or the two images differ in layout.
std::string patch_compiled_data(std::string data, const std::vector<WeightEntry>& old_images,
                                const std::vector<WeightEntry>& new_images, const std::string& program);
void remove_model_dir(const ModelDir& dir) noexcept;

// ---- the folder across an unload ---------------------------------------------------------------
// A decompiled copy of the framework (iOS 18.2) removes a model's folder in unloadWithQoS:, while a
// later load reads the compiled `data` file there and a delta reload reads the weight files and
// `data` (patch_compiled_data). KeptModelDir hard-links every file of the folder into a sibling
// folder before the unload — a second name for the same bytes, nothing copied — and restore() puts
// back whatever the unload removed. The links go when it does. On a framework that leaves the
// folder alone, restore() finds nothing missing.
class KeptModelDir {
 public:
  explicit KeptModelDir(const ModelDir& dir);  // best effort: a file that cannot be linked is not kept
  ~KeptModelDir();
  KeptModelDir(const KeptModelDir&) = delete;
  KeptModelDir& operator=(const KeptModelDir&) = delete;
  // Puts back each kept file the folder has lost; returns how many. Throws a runtime error naming
  // the file when one cannot be put back.
  int restore();
  const std::string& kept_root() const { return kept_root_; }  // <root>.orion-kept

 private:
  std::string root_, kept_root_;
  std::vector<std::string> files_;  // paths relative to the folder: "model.mil", "data", "weights/w.bin"
};

// ---- one identity per model ------------------------------------------------------------------
// The framework names a model by hashes of what it was handed — "<MIL hash>_<weights hash>_<options
// hash>" — and keeps it in <NSTemporaryDirectory()>/<that name>, a folder of the user's, not of the
// process: two processes compiling the same program (orion serve beside orion train, two test
// processes) would share one folder, and one's delta reload or unload would rewrite or remove what
// the other loads. The weights hash may not even see the values: per weight it hashes one value of
// the {offset, data} entry, whichever the dictionary lists first. So the driver makes every model's
// MIL text its own: an entry in the program's buildInfo dictionary — metadata the MIL compiler
// records and the hardware never reads — carries a salt unique to this process and this model.
inline constexpr const char* kModelSaltKey = "orion-model";
// `mil_text` with {"<key>", "<value>"} added to its [buildInfo = dict<string, string>({...})] line,
// or with such a line added after `program(...)` when it has none (unchanged when it has neither).
std::string with_build_info_entry(const std::string& mil_text, const std::string& key, const std::string& value);
// A salt no other process shares: the process id and 64 random bits, "<pid>-<16 hex digits>".
const std::string& process_salt();

// Models with the same hexStringIdentifier share one folder: the folder is removed when the last
// program using it goes.
class ModelDirUsers {
 public:
  void acquire(const std::string& root) { ++users_[root]; }
  // True when that was the last user (the caller removes the folder).
  bool release(const std::string& root);
  int users(const std::string& root) const;

 private:
  std::map<std::string, int> users_;
};

// ---- bindings (C6) -----------------------------------------------------------------------------
struct IoPlan {
  compiler::BindingTable inputs, outputs;  // sorted by MIL name, uniform allocation size per side
};
// Reads the function's parameters and returned values from the MIL text (the compiler's parser,
// which also resolves every BLOBFILE against `weights`). A text the parser refuses is a
// DriverError(CompileFailed) carrying the parser's line and column.
IoPlan plan_io(const std::string& mil_text, const WeightDict& weights, const compiler::ChipProfile& chip,
               const std::string& program);
// The _ANERequest index array of one side: 0…n−1, entry i for the i-th name in alphabetical order.
std::vector<int> request_indices(const compiler::BindingTable& table);
// Where the k-th DECLARED input (output) goes in the request: its index in alphabetical order.
std::vector<int> declared_to_binding(const compiler::BindingTable& table);

// ---- surfaces (C5, C7, C13, C14) ---------------------------------------------------------------
// The IOSurface properties of one flat buffer (kIOSurfaceWidth, …): width = bytes, height 1,
// 1 byte per element, bytes per row = width, alloc size = width, pixel format 0.
struct SurfaceSpec {
  int64_t width = 0, height = 1, bytes_per_element = 1, bytes_per_row = 0, alloc_size = 0;
  uint32_t pixel_format = 0;
};
SurfaceSpec surface_spec(size_t alloc_bytes);

// Checks the caller's surfaces against the program before the hardware sees them and throws
// DriverError(BadSurfaces) — the status the hardware would answer (0x1d) — saying which rule and
// which MIL name: wrong count, non-uniform sizes (C13 inputs, C5 outputs), below the chip minimum
// (C7), or too small for the packed data (C14).
void check_surfaces(const IoPlan& io, const std::vector<size_t>& input_bytes, const std::vector<size_t>& output_bytes,
                    const compiler::ChipProfile& chip, const std::string& program);

// ---- availability ------------------------------------------------------------------------------
// The NotAvailable error off macOS (no framework, and no fake named by kFrameworkPathEnv).
DriverError not_available_off_macos();

// ---- statuses ----------------------------------------------------------------------------------
enum class Phase { Compile, Load, Evaluate, Unload };
const char* phase_name(Phase p);  // "compile", "load", "evaluate", "unload"
// The hardware status quoted in a framework error text ("… Failed with status=0x1d : statusType=0x9:
// Program Inference error"), if any.
std::optional<uint32_t> parse_status(const std::string& error_text);
// The DriverStatus of a failed call: 0x1d → BadSurfaces in any phase; otherwise by phase.
DriverStatus status_for(Phase phase, std::optional<uint32_t> hardware_status);
// The error for a framework call that returned NO (or nil). `error_text` is the NSError's
// description ("" when there was none); `compiles` is this process's compile count so far, so a
// compile failure at or past the chip's budget says that the budget is the likely cause (C9).
DriverError framework_error(Phase phase, const std::string& program, const std::string& error_text,
                            const compiler::ChipProfile& chip, int compiles);

}  // namespace orion::runtime::ane
