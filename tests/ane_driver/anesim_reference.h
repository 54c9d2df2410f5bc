// What the tests of tests/ane_driver/ compare the driver with: the input they feed a one-input
// program, and what a fresh compile of the program computes from it on anesim (which the fake
// framework computes with, so the driver must give the same bytes).
#pragma once
#include <cstdint>
#include <vector>

#include "compiler/program.h"
#include "runtime/anesim/anesim_driver.h"

namespace orion::test {

inline runtime::Surface input_of(const compiler::CompiledProgram& p) {
  runtime::Surface x(p.inputs.alloc_bytes);
  std::vector<float> v(p.inputs.alloc_bytes / 2);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(i % 31) / 31.0f - 0.5f;
  x.write_f32(v.data(), v.size());
  return x;
}

// The output surface's bytes after a fresh compile of `p` evaluates input_of(p) on anesim.
inline std::vector<uint8_t> fresh_output(const compiler::CompiledProgram& p) {
  auto sim = runtime::anesim::make_anesim_driver();
  auto q = sim->compile(p.mil_text, p.weights, "fresh");
  sim->load(*q);
  runtime::Surface x = input_of(p), y(p.outputs.alloc_bytes);
  sim->evaluate(*q, {&x}, {&y});
  return {y.data(), y.data() + y.alloc_bytes()};
}

}  // namespace orion::test
