// The training half of a model family (model/family/family.h holds the rest): its block runners —
// forward and backward of one block on the CPU, and through ANE programs (the whole model, or a
// LoRA adapter over a frozen base). Each family's files are in train/family/<name>/, listed once in
// registry.cpp. The shared training code (train/model, train/ane, train/lora, train/loop) asks
// training_family() instead of switching on the family id.
#pragma once
#include <memory>

#include "train/ane/ane_blocks.h"
#include "train/model/trainer_api.h"

namespace orion::train {

struct TrainingFamily {
  Arch id;
  // The CPU runner, sized for up to B×T tokens; grads may be null (forward only: evaluation).
  std::unique_ptr<BlockRunner> (*cpu_blocks)(const Params& params, Grads* grads, int B, int T,
                                             const ActivationCheckpointing& ckpt);
  // The ANE runner (ane_blocks.h make_ane_blocks).
  std::unique_ptr<AneBlocks> (*ane_blocks)(const Params& params, Grads* grads, int B, int T, const AneTrainOptions& o);
  // The LoRA runner: base frozen and baked, q, v adapters as inputs (ane_blocks.h make_lora_ane_blocks).
  std::unique_ptr<AneBlocks> (*lora_ane_blocks)(const Params& base, const LoraAdapter& adapter, AdapterGradSink& sink, int B,
                                                int T, const AneTrainOptions& o);
};

// The training half of the family with that id (registry.cpp); an Input error naming the family
// when it has none.
const TrainingFamily& training_family(Arch id);

}  // namespace orion::train
