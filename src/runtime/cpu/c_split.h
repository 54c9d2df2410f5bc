// How the training products share C between threads (internal to runtime/cpu: train_gemm.cpp and
// train_gemm_lowp.cpp use the same rule).
//
// A batch of a few hundred tokens against a large B (y = x·Wᵀ, dx = dy·W) has few row tiles of C:
// 256 rows are 43 tiles of 6, which do not split into equal runs (22 vs 21). Then each thread takes
// an equal run of B's column panels for all rows instead (cpu::thread_share in units of a panel) —
// B is read (and packed) once in all, not once per thread. With many row tiles (dW: a weight's rows)
// the rows are split.
#pragma once

namespace orion::cpu::c_split {

// Whether C of `tiles` row tiles and `panels` column panels is split by panels over `threads`.
inline bool by_panels(int tiles, int panels, int threads) { return tiles < 32 * threads && panels >= threads; }

}  // namespace orion::cpu::c_split
