// Serving on the ANE path (anesim, or the ANE through the same Driver interface): `slots`
// sequences, each an AneModel of its own — its own KV cache — over ONE program cache, so every
// program is compiled once for all of them.
//
// Batched decode. A decode step runs its rows as the columns of the decode programs
// (AneModel::decode_batch): one evaluation per program for all rows, so the weights are streamed
// once per step, as the CPU's BatchedDecoder does. The buckets are the single row's (16, or the
// attention bucket) and wider ones (32, 64, …) only for batches that do not fit, each compiled
// once; requests coming and going compile nothing more. Rows with different adapters share the
// evaluation: the projections program takes up to kAdapterSlots adapters at once (stacked, with a
// per-column mask choosing each row's), so mixing adapters costs neither compiles nor evaluations
// until a step holds more distinct adapters than that (then the projections split, nothing else).

// Adapters. The attention programs take the LoRA matrices as inputs (a rank slot fixed at
// construction), so switching a slot's adapter — per request, or to one added at run time —
// replaces host tensors only: the compile count does not move. With a rank slot of 0 the programs
// have no adapter inputs (the same programs `orion generate --backend anesim` runs without --lora)
// and check_adapter() refuses every adapter.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "infer/ane_model.h"
#include "infer/slot_decoder.h"

namespace orion {

class AneSlotDecoder final : public SlotDecoder {
 public:
  // The weights and the cache (with its driver) must outlive the decoder. max_seq ≤ 0: the
  // model's seq_len; lora_rank_slot 0: no adapters. Compiles nothing yet (programs compile on
  // first use: one set per prefill bucket, one for decode).
  AneSlotDecoder(const ModelWeights& w, runtime::ProgramCache& cache, int slots, int max_seq, int lora_rank_slot,
                 const std::string& model_name);

  const float* prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult) override;
  const float* decode(const std::vector<Row>& rows) override;

  int slots() const override { return int(models_.size()); }
  int max_seq() const override { return models_.front()->max_seq(); }
  int vocab_size() const override { return models_.front()->vocab_size(); }

  void check_adapter(const LoraAdapter& adapter, const std::string& name) const override;
  int program_compiles() const override { return compiles_.load(); }

 private:
  // Points slot's model at `adapter`. decode() calls it only when a row's adapter differs from the
  // slot's (within a sequence the adapter stays alive and in place: its address identifies it).
  void set_adapter(int slot, const LoraAdapter* adapter, float scale_mult);
  void count_compiles() { compiles_ = cache_.driver().counters().compiles; }

  // Adapters per evaluation of the projections (fewer with fewer slots): each costs 2·r·(C + out)
  // multiply-adds per row against the base projections' C·(Q + 2·KV), a few percent at 4.
  static constexpr int kAdapterSlots = 4;

  runtime::ProgramCache& cache_;
  int lora_slot_;
  int adapter_slots_;                              // decode_batch's adapter_slots: 0 without a rank slot
  std::vector<std::unique_ptr<AneModel>> models_;  // [slots]
  struct InUse {
    const LoraAdapter* adapter = nullptr;
    float scale_mult = 1.0f;
  };
  std::vector<InUse> in_use_;      // [slots]: what each model's adapter inputs hold
  std::vector<float> logits_;      // [rows that want logits, V]
  std::vector<float> all_logits_;  // [rows, V]
  std::atomic<int> compiles_{0};
};

}  // namespace orion
