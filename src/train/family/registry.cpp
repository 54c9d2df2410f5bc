// The registered training halves of the model families (training_family.h). Adding a family: its
// folder beside llama/ and gpt2/, and one line in the list below (docs/adding-a-model-family.md).
#include "base/error.h"
#include "train/family/gpt2/gpt2_training.h"
#include "train/family/llama/llama_training.h"

namespace orion::train {

const TrainingFamily& training_family(Arch id) {
  static const TrainingFamily* const families[] = {
      &llama_training(Arch::Llama),
      &llama_training(Arch::Qwen2),
      &llama_training(Arch::Qwen3),
      &llama_training(Arch::Mistral),
      &gpt2_training(),
  };
  for (const TrainingFamily* f : families)
    if (f->id == id) return *f;
  throw_input_error({}, fmt::format("training does not implement the {} family yet", arch_name(id)), {}, -1,
                    "train a Llama-like (Llama, SmolLM2, Qwen2, Qwen3, Mistral) or GPT-2 model");
}

}  // namespace orion::train
