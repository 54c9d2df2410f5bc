// The KV cache of one sequence on the CPU: every layer's keys and values for positions 0 .. max_seq−1.
//
// Layout [L, NKV, max_seq, HS] (cpu::KvLayout::heads): within a layer, each kv head's positions lie
// one after another. A decode step reads, per query head, that head's keys and values at every
// cached position — with one row per position ([max_seq, NKV·HS]) that is HS floats out of every
// NKV·HS (256 B every 3 KB for Stories110M), a stride the hardware prefetchers do not follow; head
// by head it is one sequential stream. Measured on the Zen 4 VM (bench_kernels BM_Attention/1/1023,
// 12 layers of Stories110M heads, 2 threads): 3.2 ms a token instead of 4.6–5.1 ms.
//
// A projection writes its keys as rows [n, NKV·HS]; store_rows() puts them in place. The memory is
// on transparent huge pages where the OS allows (assign_on_huge_pages).
//
// The elements are f32 (the reference) or f16 (`--kv-cache f16`): half the memory, and half the
// bytes a decode step reads from the cache — what long contexts spend their time on. Each key and
// value is then rounded to f16 once, when it is stored; attention reads it back exactly (KvLayout).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "model/config.h"
#include "runtime/cpu/kernels.h"

namespace orion {

class KvCache {
 public:
  KvCache() = default;
  // dtype: F32 or F16 (anything else is a usage error).
  KvCache(const ModelConfig& c, int max_seq, DType dtype = DType::F32);

  const cpu::KvLayout& layout() const { return layout_; }
  DType dtype() const { return layout_.dtype; }
  // Layer l's keys / values, position 0 of kv head 0 (layout(): elements of dtype()).
  void* k(int layer) { return const_cast<void*>(std::as_const(*this).k(layer)); }
  void* v(int layer) { return const_cast<void*>(std::as_const(*this).v(layer)); }
  const void* k(int layer) const { return element(k32_, k16_, layer); }
  const void* v(int layer) const { return element(v32_, v16_, layer); }
  // Bytes the cache holds per position of one layer (keys and values).
  size_t bytes_per_position() const { return 2 * size_t(kv_dim_) * layout_.elem_bytes(); }
  // What a decode step at position pos reads from layer l's cache, appended to `reads`: each kv
  // head's keys, then its values, at positions 0 .. pos (one run each in this layout).
  void add_decode_reads(int layer, int pos, std::vector<cpu::ByteRange>& reads) const;
  // The keys and values of n tokens at positions pos .. pos+n−1 of layer l, given as rows
  // k, v: [n, NKV·HS] (row t: position pos + t).
  void store_rows(int layer, int pos, const float* k, const float* v, int n);

 private:
  template <typename T32, typename T16>
  const void* element(const T32& f32, const T16& f16, int layer) const {
    return layout_.dtype == DType::F16 ? static_cast<const void*>(f16.data() + size_t(layer) * layer_elems_)
                                       : static_cast<const void*>(f32.data() + size_t(layer) * layer_elems_);
  }

  int kv_dim_ = 0;
  size_t layer_elems_ = 0;  // NKV·max_seq·HS
  cpu::KvLayout layout_{};
  std::vector<float> k32_, v32_;     // an f32 cache
  std::vector<uint16_t> k16_, v16_;  // an f16 cache
};

}  // namespace orion
