// What Orion refuses about the newer Hugging Face families, and where: config.json options it does
// not implement (Input errors naming the file and the field), broken shard sets, and the paths that
// run only the plain blocks (the ANE programs, LoRA, the .bin formats; training refuses in
// train/model/params.cpp, tests/train/test_params.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/frontends/program_set.h"
#include "model/io/io_internal.h"
#include "model/io/model_io.h"
#include "model/lora/lora.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

using nlohmann::json;
using test::expect_input_error;

// A tiny model of the family written as a Hugging Face folder; edit changes its config.json.
ModelConfig tiny(Arch arch) {
  ModelConfig c = test::tiny_llama(true);
  c.arch = arch;
  if (arch == Arch::Qwen3) c.head_size = 32;
  if (arch == Arch::Mistral) c.sliding_window = 8;
  return c;
}

template <typename Edit>
std::string hf_folder(Arch arch, Edit edit) {
  const std::string dir = test::temp_dir() + "/hf";
  save_model(test::random_model(tiny(arch), 5), dir, ModelFormat::Safetensors);
  json j = json::parse(test::read_text(dir + "/config.json"));
  edit(j);
  test::spit(dir + "/config.json", j.dump(2));
  return dir;
}

// load_model(dir) fails naming dir/config.json, the field and the words.
template <typename Edit>
void expect_config_refused(Arch arch, Edit edit, std::initializer_list<std::string> words) {
  const std::string dir = hf_folder(arch, edit);
  expect_input_error([&] { load_model(dir); }, dir + "/config.json", words);
}

TEST(HfRefusals, UnknownModelTypeOrArchitecture) {
  expect_config_refused(Arch::Llama, [](json& j) { j["model_type"] = "mixtral"; }, {"model_type", "'mixtral'", "qwen3"});
  expect_config_refused(Arch::Llama, [](json& j) { j["architectures"] = {"LlamaForSequenceClassification"}; },
                        {"field 'architectures'", "LlamaForSequenceClassification", "LlamaForCausalLM"});
  expect_config_refused(Arch::Qwen2, [](json& j) { j["architectures"] = {"Qwen2MoeForCausalLM"}; },
                        {"architectures", "Qwen2ForCausalLM"});
}

TEST(HfRefusals, RopeScalingTypesOtherThanLlama3) {
  expect_config_refused(Arch::Llama,
                        [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
                        {"field 'rope_scaling.rope_type'", "\"yarn\" is not supported (supported: llama3, none)"});
  expect_config_refused(Arch::Qwen2, [](json& j) { j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; },
                        {"rope_scaling.type", "\"dynamic\""});
  expect_config_refused(Arch::Llama,
                        [](json& j) {
                          j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}};
                        },
                        {"rope_scaling.low_freq_factor", "missing"});
  // "default" is plain RoPE.
  const std::string plain = hf_folder(Arch::Llama, [](json& j) { j["rope_scaling"] = {{"rope_type", "default"}}; });
  EXPECT_EQ(load_model(plain).config.rope_scaling.kind, RopeScaling::Kind::None);
}

TEST(HfRefusals, MixtureOfExpertsAndBiasOptions) {
  expect_config_refused(Arch::Mistral, [](json& j) { j["num_local_experts"] = 8; },
                        {"num_local_experts", "mixture-of-experts"});
  expect_config_refused(Arch::Qwen2, [](json& j) { j["num_experts"] = 60; }, {"num_experts", "mixture-of-experts"});
  expect_config_refused(Arch::Llama, [](json& j) { j["attention_bias"] = true; }, {"attention_bias", "not supported"});
  expect_config_refused(Arch::Qwen3, [](json& j) { j["attention_bias"] = true; }, {"attention_bias"});
  expect_config_refused(Arch::Llama, [](json& j) { j["mlp_bias"] = true; }, {"mlp_bias"});
  expect_config_refused(Arch::Llama, [](json& j) { j["hidden_act"] = "gelu"; }, {"hidden_act", "\"gelu\""});
  expect_config_refused(Arch::Qwen2, [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window"});
  // num_experts 0 is a dense model.
  EXPECT_NO_THROW(load_model(hf_folder(Arch::Llama, [](json& j) { j["num_experts"] = 0; })));
}

TEST(HfRefusals, MistralSlidingWindowNullAbsentOrSet) {
  EXPECT_EQ(load_model(hf_folder(Arch::Mistral, [](json& j) { j["sliding_window"] = nullptr; })).config.sliding_window, 0);
  EXPECT_EQ(load_model(hf_folder(Arch::Mistral, [](json& j) { j.erase("sliding_window"); })).config.sliding_window, 4096);
  EXPECT_EQ(load_model(hf_folder(Arch::Mistral, [](json&) {})).config.sliding_window, 8);
}

// ---- sharded checkpoints ------------------------------------------------------------------------

// The folder's model.safetensors split into two shards (one tensor moved to the second) + an index.
std::string sharded_folder() {
  const std::string dir = hf_folder(Arch::Llama, [](json&) {});
  io::SafetensorsFile whole = io::SafetensorsFile::open(dir + "/model.safetensors");
  ModelWeights holder;
  std::vector<Tensor> tensors;
  tensors.reserve(whole.entries().size());
  for (const io::SafetensorsEntry& e : whole.entries())
    tensors.push_back(io::view_or_copy(holder, e.data, *e.dtype, e.shape));
  std::vector<io::SafetensorsOut> first, second;
  json map = json::object();
  for (size_t i = 0; i < tensors.size(); i++) {
    const std::string& name = whole.entries()[i].name;
    const bool later = name == "model.norm.weight";
    (later ? second : first).push_back({name, &tensors[i], tensors[i].dtype});
    map[name] = later ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  io::write_safetensors(dir + "/model-00001-of-00002.safetensors", first, {});
  io::write_safetensors(dir + "/model-00002-of-00002.safetensors", second, {});
  test::spit(dir + "/model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", map}}.dump());
  std::filesystem::remove(dir + "/model.safetensors");  // (preferred to the index while it is there)
  return dir;
}

TEST(HfRefusals, ShardedCheckpointReadsAndNamesWhatIsMissing) {
  const std::string dir = sharded_folder();
  const ModelWeights sharded = load_model(dir);
  EXPECT_EQ(sharded.config.n_layers, 2);

  std::filesystem::rename(dir + "/model-00002-of-00002.safetensors", dir + "/elsewhere");
  expect_input_error([&] { load_model(dir); }, dir + "/model.safetensors.index.json",
                     {"shard model-00002-of-00002.safetensors is missing", "model.norm.weight"});
  std::filesystem::rename(dir + "/elsewhere", dir + "/model-00002-of-00002.safetensors");

  // The index places a tensor in a shard that does not hold it.
  json index = json::parse(test::read_text(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "model-00002-of-00002.safetensors";
  test::spit(dir + "/model.safetensors.index.json", index.dump());
  expect_input_error([&] { load_model(dir); }, dir + "/model-00002-of-00002.safetensors",
                     {"model.layers.0.mlp.up_proj.weight", "tensor is missing"});

  // A tensor the index does not list at all.
  index["weight_map"].erase("model.layers.0.mlp.up_proj.weight");
  test::spit(dir + "/model.safetensors.index.json", index.dump());
  expect_input_error([&] { load_model(dir); }, dir + "/model.safetensors.index.json",
                     {"model.layers.0.mlp.up_proj.weight", "tensor is missing"});

  // A shard name that is a path.
  index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "../model-00001-of-00002.safetensors";
  test::spit(dir + "/model.safetensors.index.json", index.dump());
  expect_input_error([&] { load_model(dir); }, dir + "/model.safetensors.index.json", {"not a file name"});
}

// ---- paths that run only the plain blocks -------------------------------------------------------

// Each feature a family adds makes ANE training and the .bin writers refuse, naming it.
TEST(HfRefusals, PlainBlockPathsRefuseEachFeature) {
  struct Case {
    ModelConfig config;
    const char* feature;
  };
  std::vector<Case> cases;
  cases.push_back({tiny(Arch::Qwen2), "q/k/v biases"});
  cases.push_back({tiny(Arch::Qwen3), "q/k norms"});
  ModelConfig wide_heads = tiny(Arch::Llama);
  wide_heads.head_size = 32;
  cases.push_back({wide_heads, "head_dim 32 ≠ hidden/heads 16"});
  ModelConfig scaled = tiny(Arch::Llama);
  scaled.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 32};
  cases.push_back({scaled, "llama3 RoPE scaling"});
  cases.push_back({tiny(Arch::Mistral), "sliding window 8"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.feature);
    const ModelWeights w = random_weights(c.config, 3);
    EXPECT_NE(c.config.describe().find(c.feature), std::string::npos) << c.config.describe();
    expect_input_error([&] { frontends::training_programs(w, {16, 16}); }, "",
                       {"the ANE path does not implement", c.feature});
    // Inference on the ANE runs every feature (tests/infer/test_anesim_families.cpp): the programs build.
    EXPECT_FALSE(frontends::inference_programs(w, 8, 16, compiler::ChipProfile{}).empty());
    // LoRA on the CPU takes every feature: an adapter made for the model fits it.
    const LoraAdapter adapter(c.config, 4, 8, {LoraTarget::Q, LoraTarget::V});
    EXPECT_NO_THROW(adapter.check_fits(c.config, "adapter.safetensors"));
    const std::string bin = test::temp_dir() + "/m.bin";
    try {
      save_model(w, bin, ModelFormat::Llama2c);
      ADD_FAILURE() << "wrote a llama2.c file";
    } catch (const Error& e) {
      EXPECT_FALSE(std::filesystem::exists(bin));
      const std::string what = e.what();
      EXPECT_TRUE(what.find(c.feature) != std::string::npos || what.find("Llama-architecture models only") != std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace orion
