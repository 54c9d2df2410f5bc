#include "model/tokenizer/bpe_merge.h"

#include <queue>

namespace orion {

BpeMergeTable build_merge_table(const std::vector<std::array<std::string, 2>>& merges,
                                const std::unordered_map<std::string, int>& ids,
                                const std::function<void(size_t, const std::string&)>& missing) {
  BpeMergeTable table;
  table.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    auto a = ids.find(left), b = ids.find(right), m = ids.find(left + right);
    if (a == ids.end() || b == ids.end() || m == ids.end())
      missing(r, a == ids.end() ? left : b == ids.end() ? right : left + right);
    table.emplace(bpe_pair_key(a->second, b->second), BpeMerge{int(r), m->second});
  }
  return table;
}

void bpe_merge(std::vector<int>& ids, const BpeMergeTable& merges) {
  // Symbols form a doubly linked list; a merge folds the right symbol into the left one. A heap
  // holds the candidate pairs ordered by (rank, position); an entry whose symbols have changed
  // since it was pushed is stale and skipped. Taking the lowest rank first and, among equal ranks,
  // the leftmost, gives the same result as encoder.py's "merge every occurrence of the best pair,
  // left to right" in O(n log n) instead of O(n²) for very long words.
  struct Symbol {
    int id, prev, next;
  };
  struct Candidate {
    int rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  const int n = static_cast<int>(ids.size());
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  for (int i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push_pair = [&](int left) {
    if (left < 0 || sym[left].next < 0) return;
    int right = sym[left].next;
    auto it = merges.find(bpe_pair_key(sym[left].id, sym[right].id));
    if (it != merges.end()) heap.push({it->second.rank, left, sym[left].id, sym[right].id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.left];
    if (left.id != c.left_id || left.next < 0 || sym[left.next].id != c.right_id) continue;  // stale
    Symbol& right = sym[left.next];
    left.id = merges.at(bpe_pair_key(c.left_id, c.right_id)).result;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.left;
    right.id = -1;  // dead: candidates that start at it are stale
    push_pair(left.prev);
    push_pair(c.left);
  }
  ids.clear();
  for (int i = 0; i >= 0 && i < n; i = sym[i].next) ids.push_back(sym[i].id);
}

}  // namespace orion
