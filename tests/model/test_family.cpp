// The model family registry (model/family/family.h): every registered family is complete and
// consistent with the shared code that trusts it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/family/family.h"
#include "model/frontends/program_set.h"

namespace orion {
namespace {

TEST(ModelFamily, IdsNamesAndModelTypesAreUniqueAndFoundAgain) {
  std::set<int> ids;
  std::set<std::string> names, types;
  for (const ModelFamily* f : model_families()) {
    EXPECT_TRUE(ids.insert(int(f->id())).second) << f->name();
    EXPECT_TRUE(names.insert(f->name()).second) << f->name();
    EXPECT_TRUE(types.insert(f->hf_model_type()).second) << f->name();
    EXPECT_EQ(&model_family(f->id()), f);
    EXPECT_EQ(find_model_family(f->name()), f);
    EXPECT_EQ(find_hf_family(f->hf_model_type()), f);
    EXPECT_STREQ(arch_name(f->id()), f->name());
  }
  EXPECT_EQ(find_model_family("qwen9"), nullptr);
  EXPECT_EQ(find_hf_family(""), nullptr);
}

// A preset is of its family, valid, and its parameter count (from the anatomy) is the number of
// values random_weights stores (a tied classifier counted once).
TEST(ModelFamily, PresetsAreValidAndCountTheirParameters) {
  for (const ModelFamily* f : model_families())
    for (const ConfigPreset& p : f->presets()) {
      if (p.config.num_params() > 20'000'000) continue;  // keep the test fast
      SCOPED_TRACE(p.name);
      EXPECT_EQ(p.config.arch, f->id());
      EXPECT_NO_THROW(p.config.validate(p.name));
      EXPECT_EQ(config_preset(p.name).describe(), p.config.describe());
      ModelWeights w = random_weights(p.config, 1);
      EXPECT_NO_THROW(w.validate(p.name));
      size_t stored = 0;
      for (auto& [name, t] : w.named_tensors()) stored += size_t(t->numel());
      EXPECT_EQ(stored, p.config.num_params());
    }
}

// The kernel tables fill every role, and a PEFT layout names a module for each projection the
// family has (q k v o w1 w2 always; w3 exactly when the FFN is gated).
TEST(ModelFamily, KernelTablesAndPeftModulesAreComplete) {
  for (const ModelFamily* f : model_families()) {
    SCOPED_TRACE(f->name());
    EXPECT_EQ(f->training_kernels(0).size(), size_t(frontends::kTrainingRoles));
    EXPECT_EQ(f->training_kernels(8).size(), size_t(frontends::kTrainingRoles));
    EXPECT_EQ(f->inference_kernels().size(), size_t(frontends::kInferenceRoles));
    for (const frontends::KernelSpec& k : f->training_kernels(0)) EXPECT_TRUE(k.build) << k.kernel;
    const PeftLayout& p = f->peft();
    for (int t = 0; t < kLoraTargetCount; t++) {
      const bool has = LoraTarget(t) != LoraTarget::W3 || f->anatomy().gated_ffn;
      EXPECT_EQ(p.module[t] != nullptr, has) << lora_target_name(LoraTarget(t));
      EXPECT_EQ(p.target_module[t] != nullptr, has) << lora_target_name(LoraTarget(t));
    }
  }
}

// The Hugging Face presets have the parameter counts of the published models (their model cards:
// Qwen3-0.6B 0.44B without embeddings, Qwen2.5-0.5B 0.36B, …), counted from the anatomy.
TEST(ModelFamily, HuggingFacePresetsHaveThePublishedSizes) {
  EXPECT_EQ(config_preset("smollm2-135m").num_params(), 134'515'008u);
  EXPECT_EQ(config_preset("smollm2-360m").num_params(), 361'821'120u);
  EXPECT_EQ(config_preset("qwen2.5-0.5b").num_params(), 494'032'768u);
  EXPECT_EQ(config_preset("qwen3-0.6b").num_params(), 596'049'920u);
  EXPECT_EQ(config_preset("llama3.2-1b").num_params(), 1'235'814'400u);
  const ModelConfig q3 = config_preset("qwen3-0.6b");
  EXPECT_EQ(q3.num_params() - size_t(q3.vocab_size) * q3.dim, 440'467'456u);
  EXPECT_EQ(q3.head_dim(), 128);
  EXPECT_EQ(config_preset("llama3.2-1b").rope_scaling.kind, RopeScaling::Kind::Llama3);
}

}  // namespace
}  // namespace orion
