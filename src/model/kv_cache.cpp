#include "model/kv_cache.h"

#include <fmt/format.h>

#include "base/error.h"

namespace orion {

KvCache::KvCache(const ModelConfig& c, int max_seq, DType dtype)
    : kv_dim_(c.kv_dim()),
      layer_elems_(size_t(max_seq) * size_t(c.kv_dim())),
      layout_(cpu::KvLayout::heads(max_seq, c.head_dim(), dtype)) {
  if (dtype != DType::F32 && dtype != DType::F16)
    throw_usage_error(fmt::format("a KV cache of {} elements", dtype_name(dtype)), "--kv-cache", "use f32 or f16");
  const size_t n = size_t(c.n_layers) * layer_elems_;
  if (dtype == DType::F16) assign_on_huge_pages(k16_, n, uint16_t(0)), assign_on_huge_pages(v16_, n, uint16_t(0));
  else assign_on_huge_pages(k32_, n, 0.0f), assign_on_huge_pages(v32_, n, 0.0f);
}

void KvCache::store_rows(int layer, int pos, const float* k, const float* v, int n) {
  for (int t = 0; t < n; t++) {
    layout_.store(this->k(layer), pos + t, k + size_t(t) * kv_dim_, 0, kv_dim_);
    layout_.store(this->v(layer), pos + t, v + size_t(t) * kv_dim_, 0, kv_dim_);
  }
}

void KvCache::add_decode_reads(int layer, int pos, std::vector<cpu::ByteRange>& reads) const {
  const size_t run = size_t(pos + 1) * size_t(layout_.head_dim) * layout_.elem_bytes();
  for (int h = 0; h < kv_dim_ / layout_.head_dim; h++) {
    reads.push_back({layout_.address(k(layer), h, 0), run});
    reads.push_back({layout_.address(v(layer), h, 0), run});
  }
}

}  // namespace orion
