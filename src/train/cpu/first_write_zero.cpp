// Weight gradients zeroed by their first write (first_write_zero.h): a table of the gradient
// buffers that zero_gradients has seen and of the product ranges noted inside them.
#include "train/cpu/first_write_zero.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace orion::train {
namespace {

struct Range {
  float* p;
  size_t n;
  bool pending;
};

struct Table {
  std::mutex mu;
  std::vector<std::pair<float*, size_t>> buffers;  // zeroed by zero_gradients: where ranges may be noted
  std::vector<Range> ranges;                       // disjoint, each inside one buffer
  std::atomic<int> pending{0};
};

Table& table() {
  static Table t;
  return t;
}

bool enabled() {  // read at each zeroing (once a step): a test switches it between runs
  const char* e = std::getenv("ORION_FIRST_WRITE_ZERO");
  return !(e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0));
}

bool inside(const float* p, size_t n, const float* g, size_t gn) { return p >= g && p + n <= g + gn; }
bool overlaps(const float* p, size_t n, const float* q, size_t qn) { return p < q + qn && q < p + n; }

// Zeroes the segments, split into blocks of 1M floats over the threads (as ParamBuffer::zero).
void zero_segments(const std::vector<std::pair<float*, size_t>>& segments) {
  constexpr size_t kBlock = size_t(1) << 20;
  std::vector<std::pair<float*, size_t>> blocks;
  size_t total = 0;
  for (auto [p, n] : segments)
    for (size_t i = 0; i < n; i += kBlock) blocks.emplace_back(p + i, std::min(kBlock, n - i)), total += blocks.back().second;
#pragma omp parallel for schedule(static) if (total > 4 * kBlock)
  for (size_t b = 0; b < blocks.size(); b++) std::memset(blocks[b].first, 0, blocks[b].second * sizeof(float));
}

// Zeroes the pending ranges that `pick` selects and marks them written (the lock is held).
template <typename Pick>
void zero_pending_where(Table& t, Pick&& pick) {
  std::vector<std::pair<float*, size_t>> segments;
  for (Range& r : t.ranges)
    if (r.pending && pick(r)) segments.emplace_back(r.p, r.n), r.pending = false, t.pending--;
  zero_segments(segments);
}

// Forgets the ranges `pick` selects, zeroing those still pending first (the lock is held).
template <typename Pick>
void drop_ranges_where(Table& t, Pick&& pick) {
  zero_pending_where(t, pick);
  std::erase_if(t.ranges, pick);
}

}  // namespace

void zero_gradients(float* g, size_t n) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!enabled()) {  // everything zeroed now, nothing pending
    zero_pending_where(t, [&](const Range& r) { return inside(r.p, r.n, g, n); });
    return zero_segments({{g, n}});
  }
  // A buffer at this address with another size, or overlapping this one, is gone: so are its ranges.
  for (auto it = t.buffers.begin(); it != t.buffers.end();) {
    const float* bg = it->first;  // (not a structured binding: clang 14 cannot capture one)
    const size_t bn = it->second;
    if ((bg == g && bn == n) || !overlaps(bg, bn, g, n)) {
      ++it;
      continue;
    }
    drop_ranges_where(t, [&](const Range& r) { return inside(r.p, r.n, bg, bn); });
    it = t.buffers.erase(it);
  }
  if (std::find(t.buffers.begin(), t.buffers.end(), std::make_pair(g, n)) == t.buffers.end()) t.buffers.emplace_back(g, n);
  // Zero the gaps between the noted ranges; the ranges become pending.
  std::vector<Range*> mine;
  for (Range& r : t.ranges)
    if (inside(r.p, r.n, g, n)) mine.push_back(&r);
  std::sort(mine.begin(), mine.end(), [](const Range* a, const Range* b) { return a->p < b->p; });
  std::vector<std::pair<float*, size_t>> gaps;
  float* at = g;
  for (Range* r : mine) {
    if (r->p > at) gaps.emplace_back(at, size_t(r->p - at));
    at = r->p + r->n;
    if (!r->pending) r->pending = true, t.pending++;
  }
  if (at < g + n) gaps.emplace_back(at, size_t(g + n - at));
  zero_segments(gaps);
}

bool first_write(float* dW, size_t n) {
  if (n == 0) return false;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.buffers.empty()) return false;
  for (Range& r : t.ranges)
    if (r.p == dW && r.n == n) {
      if (!r.pending) return false;  // written already this backward (or zeroed): add to it
      r.pending = false, t.pending--;
      return true;
    }
  // A new range: any noted range it overlaps is no longer a whole product's (zero and forget it).
  bool overlapped = false;
  drop_ranges_where(t, [&](const Range& r) { return overlaps(r.p, r.n, dW, n) ? (overlapped = true) : false; });
  if (overlapped) return false;
  for (auto [g, gn] : t.buffers)
    if (inside(dW, n, g, gn)) {
      t.ranges.push_back({dW, n, false});  // this time it was zeroed with the rest
      break;
    }
  return false;
}

void finish_gradients(float* g, size_t n) {
  Table& t = table();
  if (t.pending.load() == 0) return;
  std::lock_guard<std::mutex> lock(t.mu);
  zero_pending_where(t, [&](const Range& r) { return inside(r.p, r.n, g, n); });
}

void forget_gradients(float* g, size_t n) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  drop_ranges_where(t, [&](const Range& r) { return inside(r.p, r.n, g, n); });
  std::erase_if(t.buffers, [&](const std::pair<float*, size_t>& b) { return inside(b.first, b.second, g, n); });
}

bool gradients_pending() { return table().pending.load() > 0; }

}  // namespace orion::train
