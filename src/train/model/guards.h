// Stability guards: the numbers a training step must refuse or repair.
//
// On the CPU (fp32) path a non-finite loss or gradient norm means the step is skipped: the update
// is not applied, AdamW's step count does not advance, the batch is consumed, and the skip is
// counted (trainer.cpp). Nothing non-finite ever reaches the parameters or a checkpoint.
//
// The ANE path (train/ane/ane_blocks.h) computes blocks in fp16, whose largest finite value
// is 65504. Two places need these helpers there, and nowhere on the CPU path:
//   * activations handed to an fp16 program: clamp_fp16_range before the cast, or a large
//     residual becomes ±Inf and poisons the whole step;
//   * input gradients read back from fp16 surfaces: sanitize_fp16 (NaN → 0, ±Inf → ±65504),
//     counted, so a rare overflow costs one damaged value instead of one skipped step.
// TrainOptions::sanitize_grads applies sanitize_fp16 to the whole gradient before the norm check,
// which lets the CPU path exercise the same policy.
#pragma once
#include <cstddef>

#include "base/dtype.h"  // kFp16Max

namespace orion::train {

size_t count_nonfinite(const float* x, size_t n);
// x = clamp(x, −65504, 65504); NaN is left as it is (see sanitize_fp16). Returns values changed.
size_t clamp_fp16_range(float* x, size_t n);
// NaN → 0, ±Inf → ±65504, other values clamped to ±65504. Returns values changed.
size_t sanitize_fp16(float* x, size_t n);

}  // namespace orion::train
