// Gradient checkpointing: which transformer blocks keep their activations from the forward to the
// backward, and which keep nothing and are run forward once more, from their input, just before
// their backward. The inputs x_l are kept anyway (TrainModel's residual stream, [L+1, B, T, C]),
// so a recomputed block costs one more forward of that block and saves its activations — the
// attention probabilities [B, NH, T, T], the MLP's [B, T, 4C] or [B, T, 3H], the norms' outputs.
// The recomputation runs the same code on the same input in the same order, so the gradients are
// bit-identical to keeping everything.
//
//   none      every block keeps its activations (L sets)
//   blocks    every block is recomputed: the runner holds ONE set, shared by all blocks
//   every-N   blocks 0, N, 2N, … are recomputed (sharing one set), the others keep theirs
#pragma once
#include <string>

namespace orion::train {

struct ActivationCheckpointing {
  int every = 0;  // 0: none; N ≥ 1: blocks l with l % N == 0 are recomputed (1 = "blocks")

  // "none", "blocks" or "every-N" (N ≥ 1); a usage error naming --checkpoint-activations otherwise.
  static ActivationCheckpointing parse(const std::string& s);
  std::string name() const;

  bool recomputed(int l) const { return every > 0 && l % every == 0; }
  // The activation sets a runner for L blocks holds: one per kept block, plus one that all the
  // recomputed blocks share (the last).
  int slots(int L) const { return every == 0 ? L : L - (L + every - 1) / every + 1; }
  // The set block l uses.
  int slot(int l, int L) const {
    if (every == 0) return l;
    if (recomputed(l)) return slots(L) - 1;
    return l - (l + every - 1) / every;  // l minus the recomputed blocks below it (0, N, …)
  }
};

}  // namespace orion::train
