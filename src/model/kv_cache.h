// The KV cache of one sequence on the CPU: every layer's keys and values for positions 0 .. max_seq−1.
//
// Layout [L, NKV, max_seq, HS] (cpu::KvLayout::heads): within a layer, each kv head's positions lie
// one after another. A decode step reads, per query head, that head's keys and values at every
// cached position — with one row per position ([max_seq, NKV·HS]) that is HS floats out of every
// NKV·HS (256 B every 3 KB for Stories110M), a stride the hardware prefetchers do not follow; head
// by head it is one sequential stream. Measured on the Zen 5 VM (bench_kernels BM_Attention/1/1023,
// 12 layers of Stories110M heads, 2 threads): 3.2 ms a token instead of 4.6–5.1 ms.
//
// A projection writes its keys as rows [n, NKV·HS]; store_rows() puts them in place. The memory is
// on transparent huge pages where the OS allows (assign_on_huge_pages).
#pragma once
#include <vector>

#include "model/config.h"
#include "runtime/cpu/kernels.h"

namespace orion {

class KvCache {
 public:
  KvCache() = default;
  KvCache(const ModelConfig& c, int max_seq);

  const cpu::KvLayout& layout() const { return layout_; }
  // Layer l's keys / values, position 0 of kv head 0 (layout()).
  float* k(int layer) { return k_.data() + size_t(layer) * layer_floats_; }
  float* v(int layer) { return v_.data() + size_t(layer) * layer_floats_; }
  // The keys and values of n tokens at positions pos .. pos+n−1 of layer l, given as rows
  // k, v: [n, NKV·HS] (row t: position pos + t).
  void store_rows(int layer, int pos, const float* k, const float* v, int n);

 private:
  int kv_dim_ = 0;
  size_t layer_floats_ = 0;  // NKV·max_seq·HS
  cpu::KvLayout layout_{};
  std::vector<float> k_, v_;
};

}  // namespace orion
