// Helpers of the anesim tests: small programs through the real compiler, surfaces sized by the
// binding tables, and moving fp32 [1, C, 1, S] tensors in and out of them.
#pragma once
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <string>

#include "compiler/chip.h"
#include "compiler/compile.h"
#include "compiler/mil/emit_mil.h"
#include "ir/interpret.h"
#include "runtime/anesim/anesim_driver.h"
#include "runtime/cpu/kernels.h"
#include "runtime/surface.h"

namespace orion::test {

using ir::Tensor32;

inline Tensor32 random_t(std::vector<int64_t> shape, uint32_t seed, float scale = 1.0f) {
  Tensor32 t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : t.data) v = ir::round_to_fp16(n(rng));  // fp16 values: input rounding is not measured
  return t;
}

// A set of surfaces of one allocation size, holding the tensors given (or empty ones).
struct Surfaces {
  std::vector<runtime::Surface> s;
  std::vector<runtime::Surface*> ptrs() {
    std::vector<runtime::Surface*> p;
    for (auto& x : s) p.push_back(&x);
    return p;
  }
};
inline Surfaces make_surfaces(size_t n, size_t alloc) {
  Surfaces r;
  r.s.assign(n, runtime::Surface(alloc));
  return r;
}

inline Tensor32 read_surface(const runtime::Surface& s, const std::vector<int64_t>& shape) {
  Tensor32 t(shape);
  s.read_f32(t.data.data(), t.data.size());
  return t;
}

// Moves rows of length S (the last axis) between shapes with the same row count per channel:
// longer rows get zeros, shorter ones are cut — what the runtime does for padded sequences (C7)
// and flattened boundaries (C14).
inline Tensor32 fit_rows(const Tensor32& t, const std::vector<int64_t>& to) {
  const int64_t S0 = t.shape.back(), S1 = to.back(), rows = t.numel() / S0;
  Tensor32 out(to);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t s = 0; s < std::min(S0, S1); s++) out.data[size_t(r * S1 + s)] = t.data[size_t(r * S0 + s)];
  return out;
}

struct ErrorStats {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_abs / std::max(1e-30, max_ref); }  // relative to the output's scale
};
inline ErrorStats compare(const Tensor32& got, const Tensor32& want) {
  ErrorStats e;
  EXPECT_EQ(got.data.size(), want.data.size());
  for (size_t i = 0; i < std::min(got.data.size(), want.data.size()); i++) {
    e.max_abs = std::max(e.max_abs, double(std::fabs(got.data[i] - want.data[i])));
    e.max_ref = std::max(e.max_ref, double(std::fabs(want.data[i])));
    if (!std::isfinite(got.data[i])) e.max_abs = INFINITY;
  }
  return e;
}

// Calls f(label) once per instruction set the CPU has × 1 and 2 threads, then restores both.
template <typename F>
void on_every_path(F f) {
  const cpu::Isa isa_before = cpu::active_isa();
  const int threads_before = cpu::num_threads();
  for (cpu::Isa isa : {cpu::Isa::Generic, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (!cpu::set_isa(isa)) continue;
    for (int threads : {1, 2}) {
      cpu::set_num_threads(threads);
      f(fmt::format("{} × {} thread(s)", cpu::isa_name(isa), threads));
    }
  }
  cpu::set_isa(isa_before), cpu::set_num_threads(threads_before);
}

}  // namespace orion::test
