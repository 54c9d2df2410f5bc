// Chip profiles (DESIGN.md §2, rule C18): what one generation of the ANE accepts and how its MIL
// must be spelled. The emitter, legalize-ane and validate-ane read everything chip-specific from
// here, so supporting a new chip is one new row in chip.cpp.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace orion::compiler {

struct ChipProfile {
  std::string name;                  // "m1", "m2", "m3", "m4", "m5"
  std::string program_version;       // "1.0", "1.3", "1.5"                       (C18)
  std::string function_target;       // "ios16", "ios18"                            (C18)
  bool verbose_literals = false;     // M1/M2: scalars spelled with full tensor types (C18)
  bool supports_cast = true;         // M1/M2: no cast op                          (C18)
  bool supports_rsqrt = true;        // C17: rsqrt fails on some chips → pow(x, −0.5)
  bool supports_concat = false;      // C1
  int buffer_alignment = 64;         // bytes; M5 wants 128                         (C18)
  int64_t min_buffer_bytes = 49152;  // C7: smaller evaluates with status 0x1d
  int max_blob_constants = 16;       // C16
  // C12: a 32000-token classifier is rejected, so the limit is below 32000; public notes give 16384
  // as the largest tensor dimension the ANE compiler accepts.
  int64_t max_conv_channels = 16384;
  // The largest sequence bucket programs are built for (compiler/sequence_bucket.h): beyond it an
  // attention kernel's [S, S] scores alone would pass 512 MB in fp16.
  int64_t max_sequence_bucket = 16384;
  int64_t sram_bytes = 32ll << 20;  // C20: working sets above this run ~30% slower
  int compile_budget = 119;         // C9: compiles per process before they fail silently
  double fp16_tflops = 19.0;        // for predicted ANE time (M4 measured ~19 TFLOPS)
  double dispatch_ms = 0.095;       // per evaluation
};

const ChipProfile& chip_profile(const std::string& name);  // Usage error listing the names if unknown
std::vector<std::string> chip_names();
const ChipProfile& default_chip();  // m4

}  // namespace orion::compiler
