// Kept bf16 weight packs (see bf16_weight_packs.h): a small table of the weights the products noted,
// each with its two packed layouts once a refresh has made them (until the next drop).
#include "runtime/cpu/bf16_weight_packs.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "base/error.h"

namespace orion::cpu {
namespace {

// Words on a 64-byte boundary (2 MB pages from 2 MB up): the packing streams whole lines into them.
struct Words {
  std::unique_ptr<uint32_t, decltype(&std::free)> p{nullptr, &std::free};
  size_t n = 0;
  void resize(size_t words) {
    if (words == n) return;
    p.reset(static_cast<uint32_t*>(allocate_zeroed(words * sizeof(uint32_t), "bf16 weight packs")));
    n = words;
  }
  bool same(const std::vector<uint32_t>& v) const { return v.size() == n && std::memcmp(v.data(), p.get(), n * 4) == 0; }
};

struct KeptWeight {
  const float* w;
  int N, K;
  Words rows, cols;       // the two layouts (KeptLayout::Rows, ::Cols); empty until a refresh packs them
  int rows_repacked = 0;  // by repack_updated_rows since the last refresh
};

struct Table {
  std::mutex mu;  // noting happens on the thread that runs the step; the lock keeps it simple
  int scopes = 0;    // open scopes that keep packs
  int disabled = 0;  // open scopes made while ORION_WEIGHT_PACKS=0
  std::vector<KeptWeight> weights;
  size_t packed = 0;  // whole weights packed by refresh_weight_packs and pack_new_weights (for tests)
};

Table& table() {
  static Table t;
  return t;
}

// The variable set to 0 (or "off"): packs are not kept (the products pack W each time, as before).
bool env_off(const char* name) {
  const char* e = std::getenv(name);
  return e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0);
}

bool verify_every_use() {  // read at each use: a test sets it while running
  const char* e = std::getenv("ORION_VERIFY_WEIGHT_PACKS");
  return e && *e && std::strcmp(e, "0") != 0;
}

KeptWeight* find(Table& t, const float* W, int N, int K) {
  for (KeptWeight& k : t.weights)
    if (k.w == W && k.N == N && k.K == K) return &k;
  return nullptr;
}

}  // namespace

ScopedBf16WeightPacks::ScopedBf16WeightPacks() : disabled_(env_off("ORION_WEIGHT_PACKS")) {
  std::lock_guard<std::mutex> lock(table().mu);
  (disabled_ ? table().disabled : table().scopes)++;
}

ScopedBf16WeightPacks::~ScopedBf16WeightPacks() {
  std::lock_guard<std::mutex> lock(table().mu);
  (disabled_ ? table().disabled : table().scopes)--;
  if (table().scopes == 0) table().weights.clear();
}

bool weight_packs_active() {
  const Table& t = table();
  return t.scopes > 0 && t.disabled == 0 && train_gemm_precision() == GemmPrecision::BF16 && bf16_dot_available();
}

void note_weight(const float* W, int N, int K) {
  if (!weight_packs_active()) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!find(t, W, N, K)) t.weights.push_back({W, N, K, {}, {}});
}

const uint32_t* kept_weight_pack(const float* W, int N, int K, KeptLayout layout) {
  if (!weight_packs_active()) return nullptr;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  const KeptWeight* k = find(t, W, N, K);
  if (!k || k->rows.n == 0) return nullptr;  // noted, not packed yet
  const Words& pack = layout == KeptLayout::Rows ? k->rows : k->cols;
  if (verify_every_use()) {  // the pack must be what the product would make from W now
    std::vector<uint32_t> rows(k->rows.n + 1), cols(k->cols.n + 1);  // (+1: unaligned, plain stores)
    pack_weight_bf16(W, N, K, rows.data() + 1, cols.data() + 1);
    rows.erase(rows.begin()), cols.erase(cols.begin());
    ORION_CHECK(k->rows.same(rows) && k->cols.same(cols),
                "a kept bf16 weight pack ([{}, {}]) is stale: the weight changed without refresh_weight_packs", N, K);
  }
  return pack.p.get();
}

namespace {
// Both layouts of k from its weight now.
void pack(Table& t, KeptWeight& k) {
  k.rows.resize(kept_pack_words(k.N, k.K, KeptLayout::Rows));
  k.cols.resize(kept_pack_words(k.N, k.K, KeptLayout::Cols));
  pack_weight_bf16(k.w, k.N, k.K, k.rows.p.get(), k.cols.p.get());
  t.packed++;
}
}  // namespace

void refresh_weight_packs(const float* begin, size_t n) {
  if (!weight_packs_active()) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  for (KeptWeight& k : t.weights) {
    const bool inside = k.w >= begin && k.w + size_t(k.N) * k.K <= begin + n;
    if (!inside) continue;
    const bool done = k.rows_repacked == k.N;
    k.rows_repacked = 0;
    if (!done) pack(t, k);
  }
}

void pack_new_weights() {
  if (!weight_packs_active()) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  for (KeptWeight& k : t.weights)
    if (k.rows.n == 0) pack(t, k);
}

size_t weights_packed_by_refresh() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.packed;
}

void repack_updated_rows(const float* begin, size_t n) {
  Table& t = table();
  const float* w;
  int N, K, r0, r1;
  uint32_t *rows, *cols;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    const KeptWeight* k = nullptr;
    for (const KeptWeight& c : t.weights)
      if (begin >= c.w && begin < c.w + size_t(c.N) * c.K) k = &c;
    if (!k || k->rows.n == 0) return;  // not a kept weight's, or not packed yet (the refresh will)
    const size_t at = size_t(begin - k->w), end = std::min(at + n, size_t(k->N) * k->K);
    if (at % k->K || (at / k->K) % 16) return;  // not the start of a block of 16 rows
    w = k->w, N = k->N, K = k->K, r0 = int(at / k->K), r1 = int(end / k->K);
    if (r1 < N) r1 = r1 / 16 * 16;  // whole blocks only, but for the last rows
    if (r1 <= r0) return;
    rows = k->rows.p.get(), cols = k->cols.p.get();
  }
  pack_weight_bf16_rows(w, N, K, rows, cols, r0, r1);  // outside the lock: the threads' blocks are disjoint
  std::lock_guard<std::mutex> lock(t.mu);
  if (KeptWeight* k = find(t, w, N, K)) k->rows_repacked += r1 - r0;
}

void drop_weight_packs() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  t.weights.clear();
}

size_t weight_pack_bytes() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  size_t b = 0;
  for (const KeptWeight& k : t.weights) b += (k.rows.n + k.cols.n) * sizeof(uint32_t);
  return b;
}

}  // namespace orion::cpu
