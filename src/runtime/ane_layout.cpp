#include "runtime/ane_layout.h"

#include <algorithm>

namespace orion::runtime {

ir::Tensor32 rows_to_ane(const float* rows, int n, int C, int S, float scale) {
  ir::Tensor32 t({1, C, 1, S});
  for (int s = 0; s < n; s++)
    for (int c = 0; c < C; c++) t.data[size_t(c) * S + s] = std::clamp(rows[size_t(s) * C + c] * scale, -kFp16Max, kFp16Max);
  return t;
}

void ane_to_rows(const ir::Tensor32& t, int n, float* rows, bool accumulate, float scale) {
  const int64_t C = t.shape[1], S = t.shape[3];
  for (int s = 0; s < n; s++)
    for (int64_t c = 0; c < C; c++) {
      const float v = t.data[size_t(c * S + s)] * scale;
      float& r = rows[size_t(s * C + c)];
      r = accumulate ? r + v : v;
    }
}

}  // namespace orion::runtime
