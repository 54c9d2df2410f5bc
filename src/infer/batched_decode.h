// Continuous batching on the CPU: several sequences, each in its own KV-cache slot, decode together
// so that one pass over the weights serves all of them.
//
// A decode step for one sequence is memory-bound: it streams every weight matrix to multiply it by
// one vector. decode() stacks the next token of B sequences into the rows of one [B, C] activation
// and runs each projection as one [B, C] × Wᵀ product (the prefill kernel), so the weights are read
// once for all B rows. What differs per row stays per row: its position (RoPE or learned), its
// slot's KV cache (written and attended to on its own), its LoRA adapter (each row adds its own
// s·B·A·x) and, in the caller, its sampler.
//
// prefill() feeds a prompt into one slot through the family's own block (ModelFamily::block_forward),
// the same code the Transformer runs; sequences join a running batch between steps and leave when
// done: the slots are independent. A step may also carry prompt tokens as rows (several of one slot
// at consecutive positions): each row's key and value enter its slot's cache before any row
// attends, so a prompt token sees the ones before it as in a prefill — the same operations row by
// row, so the same logits as prefill().
#pragma once
#include <vector>

#include "infer/slot_decoder.h"
#include "model/lora/lora.h"
#include "model/transformer.h"

namespace orion {

class BatchedDecoder final : public SlotDecoder {
 public:
  // `slots` sequences of at most max_seq tokens (≤ 0: the model's seq_len), each with a KV cache of
  // kv_cache elements (F32 or F16, as Transformer's). The weights must outlive it.
  BatchedDecoder(const ModelWeights& weights, int slots, int max_seq = 0, DType kv_cache = DType::F32);

  // Row (infer/slot_decoder.h): one sequence's token, position, slot and adapter in a decode step.

  // Feeds tokens[0..n) at positions 0..n−1 of `slot` (a new sequence). Returns the last token's logits [V],
  // valid until the next call.
  const float* prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult = 1.0f) override;
  // One token for each row, plus up to prompt_rows() prompt tokens (see SlotDecoder::decode).
  // Returns the logits [rows wanting them, V].
  const float* decode(const std::vector<Row>& rows) override;
  int prompt_rows() const override { return kPromptRows; }
  static constexpr int kPromptRows = 64;  // prompt tokens a step takes besides its decoding rows

  int slots() const override { return slots_; }
  int max_seq() const override { return max_seq_; }
  int vocab_size() const override { return w_.config.vocab_size; }

 private:
  void check_tokens(const int* tokens, int n, int pos) const;
  void check_rows(const std::vector<Row>& rows) const;
  void embed(const int* tokens, const int* positions, int n);
  void classify(const float* x, int rows, float* logits);
  // One layer for all rows, a parallel region per product (any rows: adapters, prompt rows).
  void decode_block(int layer, const std::vector<Row>& rows, const std::vector<std::vector<LoraLayerRef>>& lora);
  // Every layer in one parallel region, the same bits (batched_step.cpp): up to cpu::kFewTokens
  // rows without adapters.
  void decode_layers_together(const std::vector<Row>& rows);
  void reserve_lora(const LoraAdapter* adapter, int rows);

  const ModelWeights& w_;
  int slots_, max_seq_, kv_dim_, layers_;
  int max_rows_;                 // rows a step holds: slots + kPromptRows
  Transformer::Activations a_;   // rows: max(kChunk, max_rows_)
  std::vector<KvCache> caches_;  // one per slot
  std::vector<float> logits_, rope_freq_, wanted_x_;
};

}  // namespace orion
