// Hugging Face model folders (model/io: safetensors + config.json): "<config.json>\n--8<--\n<model.safetensors>";
// without the marker the input is the safetensors file beside a fixed tiny Llama config.
#include "model/io/model_io.h"
#include "support.h"

namespace {
constexpr std::string_view kConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
 "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 2, "vocab_size": 16, "max_position_embeddings": 8, "rms_norm_eps": 1e-5,
 "tie_word_embeddings": true, "torch_dtype": "float32"})";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orion;
  const auto [config, tensors] = fuzz::split_two(fuzz::as_text(data, size), kConfig);
  fuzz::write_scratch("config.json", config);
  std::string path = fuzz::write_scratch("model.safetensors", tensors);
  fuzz::expect_clean([&] { load_model(path); });
  return 0;
}
