// The registered model families. Adding a family: its folder beside llama/, gpt2/, qwen2/ …, and one line
// in the list below (docs/adding-a-model-family.md).
#include <fmt/format.h>

#include "base/error.h"
#include "model/family/gpt2/gpt2.h"
#include "model/family/llama/llama.h"
#include "model/family/mistral/mistral.h"
#include "model/family/qwen2/qwen2.h"
#include "model/family/qwen3/qwen3.h"

namespace orion {

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> families = {
      &llama_family(),
      &gpt2_family(),
      &qwen2_family(),
      &qwen3_family(),
      &mistral_family(),
  };
  return families;
}

const ModelFamily& model_family(Arch id) {
  for (const ModelFamily* f : model_families())
    if (f->id() == id) return *f;
  ORION_CHECK(false, "no model family registered for architecture id {}", int(id));
  return *model_families().front();
}

const ModelFamily* find_model_family(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (name == f->name()) return f;
  return nullptr;
}

const ModelFamily* find_hf_family(const std::string& model_type) {
  for (const ModelFamily* f : model_families())
    if (model_type == f->hf_model_type()) return f;
  return nullptr;
}

std::string model_family_names() {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families()) names.push_back(f->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace orion
