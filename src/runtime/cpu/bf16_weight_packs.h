// Kept bf16 operands of the training step's weight matrices (bf16 precision, vdpbf16ps path).
//
// Every product of a weight W [N, K] packs W into bf16 pairs first: y = x·Wᵀ (forward) and
// dx = dy·W (backward) each read all of W in fp32 and write it again as bf16, twice per step for
// the same weights — ~70 ms of a 700 ms GPT-2 124M step (B 4, T 64) on the 2-core Zen 4 machine.
// Weights change only when the optimiser updates them, so their owner repacks them once after each
// update, both layouts in one pass (pack_weight_bf16), and the products use those packs until the
// next update.
//
// The contract that keeps this exact:
//   - Packs exist only inside a ScopedBf16WeightPacks (the training loop and `orion bench train`
//     hold one while they train with --precision bf16); outside one every call here does nothing
//     and every product packs its weight itself, as before. ORION_WEIGHT_PACKS=0 turns them off
//     (they hold 4 bytes per weight: 0.5 GB for GPT-2 124M).
//   - A product notes each weight it multiplies (note_weight); refresh_weight_packs(begin, n), called
//     right after the weights in [begin, begin + n) were updated, repacks the noted weights inside
//     that range. A weight changed in any other way must be followed by refresh or drop_weight_packs().
//     AdamW repacks each block of 16 rows right after updating it (repack_updated_rows: the rows are
//     still in cache, where the refresh would read all 500 MB of GPT-2 124M's weights again).
//   - A pack is the same bytes the product would pack (tests/runtime/test_bf16_weight_packs.cpp), so
//     a step gives the same bits with or without them; ORION_VERIFY_WEIGHT_PACKS=1 makes every use
//     compare the kept pack with a fresh one and stop on a difference (the tests set it).
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/cpu/train_kernels.h"

namespace orion::cpu {

class ScopedBf16WeightPacks {
 public:
  ScopedBf16WeightPacks();
  ~ScopedBf16WeightPacks();  // drops every pack
  ScopedBf16WeightPacks(const ScopedBf16WeightPacks&) = delete;
  ScopedBf16WeightPacks& operator=(const ScopedBf16WeightPacks&) = delete;

 private:
  bool disabled_;  // ORION_WEIGHT_PACKS=0 when it was made: no packs while it is open
};

// Whether packs are kept now: inside a scope, bf16 precision, and the vdpbf16ps path.
bool weight_packs_active();
// A product multiplies W [N, K] (row-major fp32): remember it for the next refresh.
void note_weight(const float* W, int N, int K);
// The kept pack of W in `layout`, or null when there is none for exactly this W, N, K.
const uint32_t* kept_weight_pack(const float* W, int N, int K, KeptLayout layout);
// The weights in [begin, begin + n) were just updated: repack every noted weight inside the range
// (but those whose every row repack_updated_rows has packed since the last refresh).
void refresh_weight_packs(const float* begin, size_t n);
// Pack every noted weight that has no pack yet (after a refresh of only the ranges that changed).
void pack_new_weights();
// How many whole weights refresh_weight_packs and pack_new_weights have packed so far (for tests).
size_t weights_packed_by_refresh();
// The optimiser just updated [begin, begin + n), a part of one tensor: if that is whole blocks of 16
// rows of a kept weight (or its last rows), repack them now, while they are in cache — the refresh
// after the update then skips a weight packed entirely this way. Thread-safe for disjoint ranges.
void repack_updated_rows(const float* begin, size_t n);
// Forget every pack (a weight changed other than through refresh, or its memory is going away).
void drop_weight_packs();
// Bytes held by kept packs (for the memory report).
size_t weight_pack_bytes();

}  // namespace orion::cpu
