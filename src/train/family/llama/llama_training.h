// The Llama family's block runners (llama_cpu_train.cpp, llama_ane_train.cpp), registered in
// train/family/registry.cpp.
#pragma once
#include "train/family/training_family.h"

namespace orion::train {

// Llama's, or that of one of its relatives (Qwen2, Qwen3, Mistral) when id names one.
const TrainingFamily& llama_training(Arch id = Arch::Llama);

std::unique_ptr<BlockRunner> make_llama_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                                  const ActivationCheckpointing& ckpt);

namespace ane {
std::unique_ptr<AneBlocks> make_llama_ane_blocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o);
std::unique_ptr<AneBlocks> make_llama_lora_ane_blocks(const Params& base, const LoraAdapter& a, AdapterGradSink& sink, int B,
                                                      int T, const AneTrainOptions& o);
}  // namespace ane

}  // namespace orion::train
