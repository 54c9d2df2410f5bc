// The registered training halves of the model families (training_family.h). Adding a family: its
// folder beside llama/ and gpt2/, and one line in the list below (docs/adding-a-model-family.md).
#include "base/error.h"
#include "train/family/gpt2/gpt2_training.h"
#include "train/family/llama/llama_training.h"

namespace orion::train {

const TrainingFamily& training_family(Arch id) {
  static const TrainingFamily* const families[] = {
      &llama_training(),
      &gpt2_training(),
  };
  for (const TrainingFamily* f : families)
    if (f->id == id) return *f;
  throw_input_error({}, fmt::format("training does not implement the {} family yet", arch_name(id)), {}, -1,
                    "train a Llama (stories, SmolLM2, Llama 3 without RoPE scaling) or GPT-2 model");
}

}  // namespace orion::train
