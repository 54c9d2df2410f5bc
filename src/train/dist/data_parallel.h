// What the training loop needs on top of a Communicator to be data-parallel.
//
// The rule that makes N ranks train exactly like one: the global batch of step k is the same rows
// whatever N is (TokenDataset shards it: rank r takes rows [r·B, (r+1)·B) of the N·B-row batch
// one rank would read), and each rank's gradient is weighted so that the all-reduced mean equals
// the gradient of the whole global batch:
//
//   the loss of a micro-batch is the mean over its counted targets (targets ≠ −1), so with n_r
//   counted targets on rank r and N = Σ n_r,
//       global gradient = Σ_r (n_r / N) · g_r = (1/world) · Σ_r (world · n_r / N) · g_r,
//   i.e. rank r scales its backward by w_r = world·n_r/N and the all-reduce averages. When every
//   row has the same number of counted targets (the token datasets: no −1 targets), w_r is
//   exactly 1 and the mean of the ranks' means is the global mean. With −1 targets (padding,
//   masked prompts) the ranks' counts differ and the weights keep the result exact; a micro-batch
//   with no counted target anywhere gets weight 0 (its loss and gradient are 0, as with one rank).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/dist/communicator.h"

namespace orion::data {
class TokenDataset;
}

namespace orion::train::dist {

// Targets that count towards the loss (≠ −1).
int64_t counted_targets(const std::vector<int>& targets);

// w[a] = world·n_r[a]/N[a] for each micro-batch a, from this rank's counts (one small all-reduce).
std::vector<double> micro_batch_weights(Communicator& comm, const std::vector<int64_t>& counts);

// A hash of a dataset's token files: each file's token count and its first and last 64K tokens
// (cheap, and enough to tell two different datasets or tokenizations apart).
uint64_t dataset_fingerprint(const data::TokenDataset& d);

// The ranks must agree on everything that shapes the numbers before the first step. Each entry is
// a part (name, this rank's hash); on a difference, rank 0 prints which part differs on which ranks
// and every rank ends with a Usage exit code (collective: the others stay silent).
struct RunPart {
  std::string name;  // "training options", "model", "data", ...
  uint64_t hash;
};
void check_ranks_agree(Communicator& comm, const std::vector<RunPart>& parts);

}  // namespace orion::train::dist
