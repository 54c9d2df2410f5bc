// Sequence buckets: an ANE program is compiled for one sequence length S (the last axis of its
// [1, C, 1, S] tensors), so a model's programs are built for a few lengths — the buckets 16, 32,
// 64, … up to the chip's max_sequence_bucket — and a shorter input occupies columns 0..n−1 with
// zeros after them. Every caller that picks an S (legalize-ane's padding, `orion compile`, the
// inference and training runners) uses these functions, so they agree on the buckets and the cap.
//
// A kernel whose positions are independent can have its sequence padded by legalize-ane up to
// the minimum buffer (C7); a kernel whose positions mix (attention) cannot, so a narrow model needs
// a wider bucket for its buffers to reach the minimum by themselves: smallest_legal_bucket.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/chip.h"
#include "ir/graph.h"

namespace orion::compiler {

constexpr int kSmallestSequenceBucket = 16;

// The smallest bucket (16, 32, 64, …) ≥ n; 0 when it would exceed chip.max_sequence_bucket.
int64_t sequence_bucket_at_least(int64_t n, const ChipProfile& chip);

// The smallest S of: T itself, then the buckets above T (up to the cap), at which no graph of graphs(S)
// breaks C7 (other rules are left to the real compile); 0 when none up to the cap does.
int smallest_legal_bucket(int T, const ChipProfile& chip, const std::function<std::vector<ir::Graph>(int S)>& graphs);

}  // namespace orion::compiler
