#include "train/model/guards.h"

#include <cmath>

namespace orion::train {

size_t count_nonfinite(const float* x, size_t n) {
  size_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) bad += !std::isfinite(x[i]);
  return bad;
}

size_t clamp_fp16_range(float* x, size_t n) {
  size_t changed = 0;
#pragma omp parallel for reduction(+ : changed) schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > kFp16Max) x[i] = kFp16Max, ++changed;
    else if (x[i] < -kFp16Max) x[i] = -kFp16Max, ++changed;
  }
  return changed;
}

size_t sanitize_fp16(float* x, size_t n) {
  size_t changed = 0;
#pragma omp parallel for reduction(+ : changed) schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) x[i] = 0.0f, ++changed;
    else if (x[i] > kFp16Max) x[i] = kFp16Max, ++changed;
    else if (x[i] < -kFp16Max) x[i] = -kFp16Max, ++changed;
  }
  return changed;
}

}  // namespace orion::train
