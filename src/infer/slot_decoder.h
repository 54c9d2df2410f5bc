// SlotDecoder: what a serving scheduler (serve/engine.h) needs from a model — `slots` sequences,
// each in a KV-cache slot of its own, fed a prompt (prefill) and then one token per step (decode),
// every row with its own position and LoRA adapter. Two implementations:
//   BatchedDecoder  (infer/batched_decode.h): the CPU, every row of a step in one pass over the weights;
//   AneSlotDecoder  (infer/ane_slot_decoder.h): the ANE path (anesim or the ANE), an AneModel per
//                   slot over one program cache, the rows of a step as the columns of one evaluation.
#pragma once
#include <string>
#include <vector>

namespace orion {

class LoraAdapter;

class SlotDecoder {
 public:
  virtual ~SlotDecoder() = default;

  // One row of a decode step: feed `token` at position `pos` of slot `slot` (pos = the tokens the
  // slot holds) with `adapter` (nullptr: the base model) scaled by scale_mult. `logits`: whether the
  // caller wants this row's logits (a prompt token that is not the prompt's last needs none).
  struct Row {
    int slot = 0, token = 0, pos = 0;
    const LoraAdapter* adapter = nullptr;
    float scale_mult = 1.0f;
    bool logits = true;
  };

  // Feeds tokens[0..n) at positions 0..n−1 of `slot` (a new sequence). Returns the last token's
  // logits [V], valid until the next call.
  virtual const float* prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult) = 0;
  // One token for each row (distinct slots, at most slots() rows). Returns the logits of the rows
  // that want them, in row order: [rows wanting logits, V].
  // Where prompt_rows() > 0, a step may also carry up to that many prompt tokens besides one row
  // per slot: several rows of one slot, at consecutive positions in row order, fed as a prefill
  // would (each attends to the positions before it) — prompts join the pass over the weights that
  // the decoding rows make anyway (chunked prefill) instead of a pass of their own.
  virtual const float* decode(const std::vector<Row>& rows) = 0;
  virtual int prompt_rows() const { return 0; }

  virtual int slots() const = 0;
  virtual int max_seq() const = 0;
  virtual int vocab_size() const = 0;

  // A usage error when `adapter` (already known to fit the model) cannot run here; the CPU runs any.
  virtual void check_adapter(const LoraAdapter& /*adapter*/, const std::string& /*name*/) const {}
  // Programs compiled so far in this process (the ANE path); −1 where nothing is compiled (the CPU).
  // Safe to call from any thread.
  virtual int program_compiles() const { return -1; }
};

}  // namespace orion
