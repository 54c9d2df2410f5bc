// The GPT-2 family's block runners (gpt2_cpu_train.cpp, gpt2_ane_train.cpp), registered in
// train/family/registry.cpp.
#pragma once
#include "train/family/training_family.h"

namespace orion::train {

const TrainingFamily& gpt2_training();

std::unique_ptr<BlockRunner> make_gpt2_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                                  const ActivationCheckpointing& ckpt);

namespace ane {
std::unique_ptr<AneBlocks> make_gpt2_ane_blocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o);
std::unique_ptr<AneBlocks> make_gpt2_lora_ane_blocks(const Params& base, const LoraAdapter& a, AdapterGradSink& sink, int B,
                                                     int T, const AneTrainOptions& o);
}  // namespace ane

}  // namespace orion::train
