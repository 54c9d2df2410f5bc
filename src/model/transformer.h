// Inference through a transformer on the CPU: the numerical reference of Orion and its fast path.
//
// A Transformer holds the activations and the KV cache of one sequence. forward() feeds n new
// tokens at positions pos .. pos+n−1: n > 1 is prefill (every projection is one matrix–matrix
// product over the n tokens), n == 1 is a decode step (matrix–vector, memory-bound).
// The blocks of each family live in the family's folder (model/family/<name>/, ModelFamily::
// block_forward); this file holds what is common: embedding, the layer loop, the final norm and the
// classifier.
#pragma once
#include <vector>

#include "base/line_aligned.h"
#include "model/kv_cache.h"
#include "model/lora/lora.h"
#include "model/weights.h"

namespace orion {

// One layer's LoRA matrices as the blocks apply them, unmerged: after the base projection of target
// t (lora.h: q k v o w1 w2 w3), y += scale·B[t]·(A[t]·x) with A [r, in], B [out, r] (null: not adapted).
struct LoraLayerRef {
  const float* A[kLoraTargetCount] = {};  // indexed by int(LoraTarget)
  const float* B[kLoraTargetCount] = {};
  int rank = 0;
  float scale = 0;
};

class Transformer {
 public:
  // max_seq ≤ 0 means the model's seq_len; kv_cache: the KV cache's elements, F32 (the reference)
  // or F16 (half the memory; model/kv_cache.h). The weights must outlive the Transformer.
  explicit Transformer(const ModelWeights& weights, int max_seq = 0, DType kv_cache = DType::F32);

  // Runs tokens[0..n) at positions pos..pos+n−1 (pos must equal the number of tokens already fed,
  // i.e. the cache is filled in order; pos 0 starts a new sequence). Returns the logits of the last
  // token, [V] — or of every token, [n, V] row-major, when all_logits is set.
  // Usage errors for out-of-range token ids or a sequence longer than max_seq.
  const float* forward(const int* tokens, int n, int pos, bool all_logits = false);

  // Runs every later forward with the adapter added to the base projections (unmerged; the weights
  // stay as they are), its scale multiplied by scale_mult; nullptr: the base model. The adapter must
  // fit the model (LoraAdapter::check_fits) and outlive its use. Switching costs nothing: start the
  // next sequence at pos 0 as usual.
  void set_lora(const LoraAdapter* adapter, float scale_mult = 1.0f);
  const LoraAdapter* lora() const { return lora_; }

  const ModelConfig& config() const { return w_.config; }
  int max_seq() const { return max_seq_; }
  DType kv_cache_dtype() const { return cache_.dtype(); }
  int vocab_size() const { return w_.config.vocab_size; }
  // The memory one decode step at position pos reads, in about the order it reads it: each layer's
  // matrices and its KV cache of positions 0 .. pos, then the classifier's rows of the vocabulary
  // (the embedding row and the norms' vectors are left out: a few KB). `orion bench generate`
  // times a plain read of exactly these bytes between decode steps for its bound.
  std::vector<cpu::ByteRange> decode_reads(int pos) const;
  // Their sum in bytes.
  double decode_bytes(int pos) const;

  // Activations of one chunk of n tokens (n ≤ kChunk), row-major, each on a 64-byte line (the
  // prompt tiles load their rows whole: base/line_aligned.h).
  struct Activations {
    using Rows = LineAlignedVector<float>;
    Rows x;                    // [n, C] residual stream
    Rows xb;                   // [n, C] normalised input of a sublayer / its output
    Rows q;                    // [n, NH·HS] queries
    Rows k, v;                 // [n, NKV·HS] keys and values, before they enter the cache
    Rows att;                  // [n, NH·HS] attention output (before wo)
    Rows hb, hb2;              // [n, H] FFN hidden (gate and up for SwiGLU)
    Rows logits;               // [n, V] or [V]
    Rows lora_ax, lora_delta;  // [n, r] = x·Aᵀ, [n, out] = s·(x·Aᵀ)·Bᵀ (with an adapter)
  };
  static constexpr int kChunk = 128;  // prefill runs in chunks of at most this many tokens

 private:
  void forward_chunk(const int* tokens, int n, int pos, float* logits_out, bool all_logits);

  const ModelWeights& w_;
  int max_seq_, kv_dim_;
  Activations a_;
  KvCache cache_;
  std::vector<float> logits_;
  const LoraAdapter* lora_ = nullptr;
  std::vector<LoraLayerRef> lora_layers_;  // [L]
};

// The per-layer pointers into an adapter's matrices as the blocks take them, each scale the
// adapter's s·scale_mult (checked to fit c first).
std::vector<LoraLayerRef> lora_layer_refs(const ModelConfig& c, const LoraAdapter& adapter, float scale_mult);

// y [n, out] += scale·(x·A[t]ᵀ)·B[t]ᵀ for target t of the layer's adapter (nothing when lora is null
// or does not adapt t). x [n, in].
void lora_add(const LoraLayerRef* lora, LoraTarget t, float* y, const float* x, int n, int in, int out,
              Transformer::Activations& a);

}  // namespace orion
