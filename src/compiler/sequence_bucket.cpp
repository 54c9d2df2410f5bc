#include "compiler/sequence_bucket.h"

#include "compiler/compile.h"

namespace orion::compiler {

int64_t sequence_bucket_at_least(int64_t n, const ChipProfile& chip) {
  int64_t b = kSmallestSequenceBucket;
  while (b < n) b *= 2;
  return b <= chip.max_sequence_bucket ? b : 0;
}

int smallest_legal_bucket(int T, const ChipProfile& chip, const std::function<std::vector<ir::Graph>(int S)>& graphs) {
  auto legal = [&](int S) {
    for (ir::Graph& g : graphs(S))
      for (const Diagnostic& d : check_graph(g, chip))
        if (d.level == Diagnostic::Level::Error && d.rule == "C7") return false;
    return true;
  };
  if (legal(T)) return T;  // the length asked for, even above the cap (a model's own context)
  for (int64_t S = sequence_bucket_at_least(int64_t(T) + 1, chip); S != 0; S = sequence_bucket_at_least(S + 1, chip))
    if (legal(int(S))) return int(S);
  return 0;
}

}  // namespace orion::compiler
