#include "infer/ane_slot_decoder.h"

#include <algorithm>

#include "base/error.h"
#include "model/lora/lora.h"

namespace orion {

AneSlotDecoder::AneSlotDecoder(const ModelWeights& w, runtime::ProgramCache& cache, int slots, int max_seq,
                               int lora_rank_slot, const std::string& model_name)
    : cache_(cache), lora_slot_(lora_rank_slot), adapter_slots_(lora_rank_slot > 0 ? std::min(slots, kAdapterSlots) : 0) {
  if (slots < 1) throw_usage_error(fmt::format("{} slots: at least 1 is needed", slots), "--parallel");
  for (int s = 0; s < slots; s++) {
    models_.push_back(std::make_unique<AneModel>(w, cache, AneModelOptions{model_name, max_seq}));
    if (lora_slot_ > 0) models_.back()->enable_lora(lora_slot_);
  }
  in_use_.resize(size_t(slots));
  logits_.resize(size_t(slots) * size_t(vocab_size()));
  count_compiles();
}

void AneSlotDecoder::check_adapter(const LoraAdapter& adapter, const std::string& name) const {
  if (lora_slot_ == 0)
    throw_usage_error(fmt::format("adapter '{}': the ANE programs were compiled without an adapter slot", name), "--lora",
                      "start orion serve with --lora-rank R (the highest rank to serve) or a --lora adapter");
  models_.front()->check_lora(adapter);
}

void AneSlotDecoder::set_adapter(int slot, const LoraAdapter* adapter, float scale_mult) {
  if (adapter) check_adapter(*adapter, "request");  // never let set_lora() enable a slot: that would compile
  models_[size_t(slot)]->set_lora(adapter, scale_mult);
  in_use_[size_t(slot)] = {adapter, scale_mult};
}

const float* AneSlotDecoder::prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult) {
  // Always set: a new sequence's adapter may sit at the address of one freed since.
  set_adapter(slot, adapter, scale_mult);
  const float* lg = models_[size_t(slot)]->forward(tokens, n, 0);
  count_compiles();
  return lg;
}

// All rows decode together: one AneModel::decode_batch — one evaluation per program — whatever
// adapters they hold (up to adapter_slots_ distinct ones share an evaluation of the projections; a
// step with more splits the projections only). A slot whose adapter differs from the row's is
// switched first: host tensors only, no compile.
const float* AneSlotDecoder::decode(const std::vector<Row>& rows) {
  const size_t V = size_t(vocab_size());
  std::vector<AneModel*> models;
  std::vector<int> tokens, pos;
  for (const Row& r : rows) {
    const InUse& now = in_use_[size_t(r.slot)];
    if (now.adapter != r.adapter || now.scale_mult != r.scale_mult) set_adapter(r.slot, r.adapter, r.scale_mult);
    models.push_back(models_[size_t(r.slot)].get());
    tokens.push_back(r.token), pos.push_back(r.pos);
  }
  all_logits_.resize(rows.size() * V);
  AneModel::decode_batch(models, tokens.data(), pos.data(), all_logits_.data(), adapter_slots_);
  // Logits go back for the rows that want them, in row order (SlotDecoder::decode).
  size_t wanted = 0;
  for (size_t i = 0; i < rows.size(); i++)
    if (rows[i].logits)
      std::copy_n(all_logits_.begin() + std::ptrdiff_t(i * V), V, logits_.begin() + std::ptrdiff_t(wanted++ * V));
  count_compiles();
  return logits_.data();
}

}  // namespace orion
