#include "infer/ane_slot_decoder.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "model/lora/lora.h"

namespace orion {

AneSlotDecoder::AneSlotDecoder(const ModelWeights& w, runtime::ProgramCache& cache, int slots, int max_seq,
                               int lora_rank_slot, const std::string& model_name)
    : cache_(cache), lora_slot_(lora_rank_slot) {
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

// Rows that share an adapter (and scale) decode together: one AneModel::decode_batch — one
// evaluation per program — per distinct adapter of the step, in the order the adapters first
// appear. The programs take one set of adapter inputs per evaluation, so rows with different
// adapters cannot share one; the grouping costs evaluations, never compiles.
const float* AneSlotDecoder::decode(const std::vector<Row>& rows) {
  const size_t V = size_t(vocab_size());
  // Logits come back for the rows that want them, in row order (SlotDecoder::decode).
  std::vector<size_t> out(rows.size());
  size_t wanted = 0;
  for (size_t i = 0; i < rows.size(); i++) out[i] = rows[i].logits ? wanted++ : SIZE_MAX;
  std::vector<bool> done(rows.size(), false);
  for (size_t i = 0; i < rows.size(); i++) {
    if (done[i]) continue;
    std::vector<size_t> group;  // indices into rows
    for (size_t j = i; j < rows.size(); j++)
      if (!done[j] && rows[j].adapter == rows[i].adapter && rows[j].scale_mult == rows[i].scale_mult)
        group.push_back(j), done[j] = true;
    decode_group(rows, group);
    for (size_t g = 0; g < group.size(); g++)
      if (out[group[g]] != SIZE_MAX)
        std::copy(group_logits_.begin() + std::ptrdiff_t(g * V), group_logits_.begin() + std::ptrdiff_t((g + 1) * V),
                  logits_.begin() + std::ptrdiff_t(out[group[g]] * V));
  }
  count_compiles();
  return logits_.data();
}

void AneSlotDecoder::decode_group(const std::vector<Row>& rows, const std::vector<size_t>& group) {
  std::vector<AneModel*> models;
  std::vector<int> tokens, pos;
  for (size_t j : group) {
    const Row& r = rows[j];
    const InUse& now = in_use_[size_t(r.slot)];
    if (now.adapter != r.adapter || now.scale_mult != r.scale_mult) set_adapter(r.slot, r.adapter, r.scale_mult);
    models.push_back(models_[size_t(r.slot)].get());
    tokens.push_back(r.token), pos.push_back(r.pos);
  }
  group_logits_.resize(group.size() * size_t(vocab_size()));
  AneModel::decode_batch(models, tokens.data(), pos.data(), group_logits_.data());
}

}  // namespace orion
