// Micro-batch weights and the agreement check of data-parallel training (data_parallel.h).
#include "train/dist/data_parallel.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "data/token_dataset.h"
#include "train/loop/checkpoint.h"

namespace orion::train::dist {

int64_t counted_targets(const std::vector<int>& targets) {
  int64_t n = 0;
  for (int t : targets) n += t != -1;
  return n;
}

uint64_t dataset_fingerprint(const data::TokenDataset& d) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& f : d.files()) {
    const size_t head = std::min<size_t>(f.count, 65536);
    h = checkpoint_hash(&f.count, sizeof(f.count), h);
    h = checkpoint_hash(f.tokens, head * sizeof(f.tokens[0]), h);
    h = checkpoint_hash(f.tokens + (f.count - head), head * sizeof(f.tokens[0]), h);
  }
  return h;
}

std::vector<double> micro_batch_weights(Communicator& comm, const std::vector<int64_t>& counts) {
  std::vector<double> w(counts.size(), 1.0);
  if (comm.world() == 1) return w;
  std::vector<double> total(counts.begin(), counts.end());  // exact: counts < 2^53
  comm.allreduce_sum(total.data(), total.size());
  for (size_t a = 0; a < counts.size(); ++a) w[a] = total[a] > 0 ? double(comm.world()) * double(counts[a]) / total[a] : 0.0;
  return w;
}

void check_ranks_agree(Communicator& comm, const std::vector<RunPart>& parts) {
  if (comm.world() == 1) return;
  std::string differences;
  for (const RunPart& part : parts) {
    const std::vector<uint64_t> all = comm.allgather(part.hash);
    std::string ranks;
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0]) ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", r);
    if (!ranks.empty())
      differences += fmt::format("\n  {}: rank {} differ{} from rank 0", part.name, ranks,
                                 ranks.find(',') == std::string::npos ? "s" : "");
  }
  if (differences.empty()) return;
  if (comm.rank() == 0)
    std::fprintf(stderr,
                 "orion: usage error: the %d ranks of this run were started with different settings:%s\n"
                 "  (hint: start every rank with the same command line, the same data and tokenizer files and the same "
                 "orion build)\n",
                 comm.world(), differences.c_str());
  comm.exit(exit_code(ErrorKind::Usage));
}

}  // namespace orion::train::dist
