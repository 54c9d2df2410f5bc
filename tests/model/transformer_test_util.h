// Helpers shared by the CPU Transformer tests (tests/model/test_transformer.cpp, test_hf_families.cpp).
#pragma once
#include <vector>

#include "model/transformer.h"
#include "runtime/cpu/kernels.h"

namespace orion::test {

// How many logits of token-by-token decode on `threads` threads differ (bitwise) from the prefill
// of the whole sequence, both with a KV cache of kv_cache elements. The thread count is reset to
// the default afterwards.
inline size_t decode_differences_from_prefill(const ModelWeights& w, const std::vector<int>& toks, int threads,
                                              DType kv_cache = DType::F32) {
  const size_t V = size_t(w.config.vocab_size);
  Transformer pre(w, 0, kv_cache);
  const float* all = pre.forward(toks.data(), int(toks.size()), 0, true);
  const std::vector<float> expect(all, all + toks.size() * V);
  cpu::set_num_threads(threads);
  Transformer dec(w, 0, kv_cache);
  size_t differing = 0;
  for (size_t t = 0; t < toks.size(); t++) {
    const float* lg = dec.forward(&toks[t], 1, int(t));
    for (size_t i = 0; i < V; i++) differing += lg[i] != expect[t * V + i];
  }
  cpu::set_num_threads(0);
  return differing;
}

}  // namespace orion::test
