#include "train/family/llama/llama_training.h"

namespace orion::train {

const TrainingFamily& llama_training() {
  static const TrainingFamily f{Arch::Llama, make_llama_cpu_blocks, ane::make_llama_ane_blocks,
                                ane::make_llama_lora_ane_blocks};
  return f;
}

}  // namespace orion::train
