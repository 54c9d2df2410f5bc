// The two layouts of activations at the ANE boundary, and the only code that converts between
// them (the inference and training runners both use it):
//   host rows [n, C] row-major — one token per row, as the CPU kernels keep them;
//   ANE [1, C, 1, S] — channels first, the sequence on the last axis (the 4-D layout of C14), a
//   sequence bucket of S ≥ n columns with tokens in columns 0..n−1 and zeros after them (padding
//   that causal attention never lets into a real column).
#pragma once
#include "base/dtype.h"
#include "ir/interpret.h"

namespace orion::runtime {

// rows [n, C] (each value times scale) → [1, C, 1, S], clamped to ±65504: a value past the fp16
// range would become ±Inf in the surface and poison everything computed from it. NaN stays NaN.
ir::Tensor32 rows_to_ane(const float* rows, int n, int C, int S, float scale = 1.0f);

// Columns 0..n−1 of t [1, C, 1, S] (each value times scale) → rows [n, C], assigned or added.
void ane_to_rows(const ir::Tensor32& t, int n, float* rows, bool accumulate = false, float scale = 1.0f);

}  // namespace orion::runtime
