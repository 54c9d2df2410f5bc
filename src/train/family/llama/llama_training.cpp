#include "train/family/llama/llama_training.h"

namespace orion::train {

// Llama's relatives run its block (model/family/llama/llama_like.h): the same runners, their
// differences read from the config and the anatomy inside them.
const TrainingFamily& llama_training(Arch id) {
  static const TrainingFamily families[] = {
      {Arch::Llama, make_llama_cpu_blocks, ane::make_llama_ane_blocks, ane::make_llama_lora_ane_blocks},
      {Arch::Qwen2, make_llama_cpu_blocks, ane::make_llama_ane_blocks, ane::make_llama_lora_ane_blocks},
      {Arch::Qwen3, make_llama_cpu_blocks, ane::make_llama_ane_blocks, ane::make_llama_lora_ane_blocks},
      {Arch::Mistral, make_llama_cpu_blocks, ane::make_llama_ane_blocks, ane::make_llama_lora_ane_blocks},
  };
  for (const TrainingFamily& f : families)
    if (f.id == id) return f;
  return families[0];
}

}  // namespace orion::train
