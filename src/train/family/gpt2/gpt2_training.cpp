#include "train/family/gpt2/gpt2_training.h"

namespace orion::train {

const TrainingFamily& gpt2_training() {
  static const TrainingFamily f{Arch::GPT2, make_gpt2_cpu_blocks, ane::make_gpt2_ane_blocks, ane::make_gpt2_lora_ane_blocks};
  return f;
}

}  // namespace orion::train
