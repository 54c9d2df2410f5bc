#include "model/kv_cache.h"

#include "base/error.h"

namespace orion {

KvCache::KvCache(const ModelConfig& c, int max_seq)
    : kv_dim_(c.kv_dim()),
      layer_floats_(size_t(max_seq) * size_t(c.kv_dim())),
      layout_(cpu::KvLayout::heads(max_seq, c.head_dim())) {
  const size_t n = size_t(c.n_layers) * layer_floats_;
  assign_on_huge_pages(k_, n, 0.0f), assign_on_huge_pages(v_, n, 0.0f);
}

void KvCache::store_rows(int layer, int pos, const float* k, const float* v, int n) {
  for (int t = 0; t < n; t++) {
    layout_.store(this->k(layer), pos + t, k + size_t(t) * kv_dim_, 0, kv_dim_);
    layout_.store(this->v(layer), pos + t, v + size_t(t) * kv_dim_, 0, kv_dim_);
  }
}

}  // namespace orion
