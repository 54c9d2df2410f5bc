#include "compiler/chip.h"

#include <fmt/format.h>

#include "base/error.h"

namespace orion::compiler {
namespace {

ChipProfile make(const char* name, const char* prog, const char* target, bool old_syntax, int align, double tflops,
                 double dispatch_ms) {
  ChipProfile p;
  p.name = name;
  p.program_version = prog;
  p.function_target = target;
  p.verbose_literals = old_syntax;
  p.supports_cast = !old_syntax;
  p.supports_rsqrt = !old_syntax;
  p.buffer_alignment = align;
  p.fp16_tflops = tflops;
  p.dispatch_ms = dispatch_ms;
  return p;
}

const std::vector<ChipProfile>& profiles() {
  // Peak fp16 TFLOPS and dispatch ms per evaluation, for anesim's predicted ANE time; with the
  // rest of the timing model's parameters (anesim_timing.cpp) each has its public source, or says
  // it is fitted or borrowed, in docs/ane-timing.md.
  static const std::vector<ChipProfile> p = {
      make("m1", "1.0", "ios16", true, 64, 11.0, 0.381),   make("m2", "1.0", "ios16", true, 64, 15.8, 0.381),
      make("m3", "1.3", "ios18", false, 64, 18.0, 0.095),  make("m4", "1.3", "ios18", false, 64, 19.0, 0.095),
      make("m5", "1.5", "ios18", false, 128, 18.2, 0.095),
  };
  return p;
}

}  // namespace

std::vector<std::string> chip_names() {
  std::vector<std::string> n;
  for (auto& p : profiles()) n.push_back(p.name);
  return n;
}

const ChipProfile& chip_profile(const std::string& name) {
  for (auto& p : profiles())
    if (p.name == name) return p;
  throw_usage_error(fmt::format("unknown chip '{}'", name), "--chip",
                    fmt::format("choose one of: {}", fmt::join(chip_names(), ", ")));
}

const ChipProfile& default_chip() { return chip_profile("m4"); }

}  // namespace orion::compiler
