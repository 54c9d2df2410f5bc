// Hugging Face config.json ⇄ ModelConfig, for the two architectures Orion runs.
//   llama: hidden_size C, intermediate_size H, num_hidden_layers L, num_attention_heads NH,
//          num_key_value_heads NKV (default NH), vocab_size V, max_position_embeddings T,
//          rms_norm_eps, rope_theta (default 10000), tie_word_embeddings (default false)
//   gpt2:  n_embd C, n_inner H (null → 4C), n_layer L, n_head NH, vocab_size V,
//          n_positions T (or n_ctx), layer_norm_epsilon; the classifier is always tied
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace {

using json = nlohmann::json;

struct Reader {
  const std::string& path;
  const json& j;

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw_input_error(path, msg, field, -1, "fix config.json, or take it from the model's original repository");
  }
  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }
  int positive_int(const char* k) const {
    if (!has(k)) fail(k, "is missing");
    if (!j[k].is_number_integer()) fail(k, fmt::format("must be an integer, got {}", j[k].dump()));
    int64_t v = j[k].get<int64_t>();
    if (v <= 0 || v > (int64_t(1) << 30)) fail(k, fmt::format("must be a positive integer, got {}", v));
    return int(v);
  }
  int positive_int_or(const char* k, int fallback) const { return has(k) ? positive_int(k) : fallback; }
  float positive_float(const char* k, std::optional<float> fallback) const {
    if (!has(k)) {
      if (fallback) return *fallback;
      fail(k, "is missing");
    }
    if (!j[k].is_number()) fail(k, fmt::format("must be a number, got {}", j[k].dump()));
    double v = j[k].get<double>();
    if (!(v > 0)) fail(k, fmt::format("must be positive, got {}", v));
    return float(v);
  }
  bool boolean_or(const char* k, bool fallback) const {
    if (!has(k)) return fallback;
    if (!j[k].is_boolean()) fail(k, fmt::format("must be true or false, got {}", j[k].dump()));
    return j[k].get<bool>();
  }
};

ModelConfig llama_config(const Reader& r) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = r.positive_int("hidden_size");
  c.hidden_dim = r.positive_int("intermediate_size");
  c.n_layers = r.positive_int("num_hidden_layers");
  c.n_heads = r.positive_int("num_attention_heads");
  c.n_kv_heads = r.positive_int_or("num_key_value_heads", c.n_heads);
  c.vocab_size = c.padded_vocab = r.positive_int("vocab_size");
  c.seq_len = r.positive_int("max_position_embeddings");
  c.norm_eps = r.positive_float("rms_norm_eps", 1e-6f);  // LlamaConfig's default
  c.rope_theta = r.positive_float("rope_theta", 10000.0f);
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  if (r.has("rope_scaling"))
    r.fail("rope_scaling", "RoPE scaling is not supported (Orion implements plain RoPE)");
  if (r.has("head_dim") && r.positive_int("head_dim") * c.n_heads != c.dim)
    r.fail("head_dim", fmt::format("head_dim × num_attention_heads must equal hidden_size {}", c.dim));
  return c;
}

ModelConfig gpt2_config(const Reader& r) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = r.positive_int("n_embd");
  c.hidden_dim = r.positive_int_or("n_inner", 4 * c.dim);
  c.n_layers = r.positive_int("n_layer");
  c.n_heads = c.n_kv_heads = r.positive_int("n_head");
  c.vocab_size = c.padded_vocab = r.positive_int("vocab_size");
  c.seq_len = r.has("n_positions") ? r.positive_int("n_positions") : r.positive_int("n_ctx");
  c.norm_eps = r.positive_float("layer_norm_epsilon", 1e-5f);
  c.tied_embeddings = true;
  if (!r.boolean_or("tie_word_embeddings", true))
    r.fail("tie_word_embeddings", "GPT-2 models with an untied classifier are not supported");
  return c;
}

// A float as JSON the way a person would write it ("1e-05", not 9.999999747378752e-06).
json json_float(float v) { return std::stod(fmt::format("{}", v)); }

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "float32";
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  if (!file_exists(path))
    throw_input_error(path, "config.json is missing", {}, -1,
                      "a safetensors model needs the config.json of its Hugging Face repository beside model.safetensors");
  std::string text = read_text_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e7777 (fuzz_hf_config)
    throw_input_error(path, fmt::format("not valid JSON: {}", e.what()), {}, int64_t(json_error_byte(e) > 0 ? json_error_byte(e) - 1 : 0),
                      "fix config.json");
  }
  if (!j.is_object()) throw_input_error(path, "config.json is not a JSON object");
  Reader r{path, j};
  std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  ModelConfig c;
  if (type == "llama") {
    c = llama_config(r);
  } else if (type == "gpt2") {
    c = gpt2_config(r);
  } else {
    r.fail("model_type", type.empty() ? "is missing" : fmt::format("'{}' is not supported (Orion runs \"llama\" and \"gpt2\")", type));
  }
  c.validate(path);
  return c;
}

std::string hf_config_json(const ModelConfig& c, DType dtype) {
  json j;
  if (c.arch == Arch::Llama) {
    j = {{"architectures", json::array({"LlamaForCausalLM"})},
         {"model_type", "llama"},
         {"hidden_size", c.dim},
         {"intermediate_size", c.hidden_dim},
         {"num_hidden_layers", c.n_layers},
         {"num_attention_heads", c.n_heads},
         {"num_key_value_heads", c.n_kv_heads},
         {"vocab_size", c.vocab_size},
         {"max_position_embeddings", c.seq_len},
         {"rms_norm_eps", json_float(c.norm_eps)},
         {"rope_theta", json_float(c.rope_theta)},
         {"tie_word_embeddings", c.tied_embeddings},
         {"hidden_act", "silu"}};
  } else {
    j = {{"architectures", json::array({"GPT2LMHeadModel"})},
         {"model_type", "gpt2"},
         {"n_embd", c.dim},
         {"n_inner", c.hidden_dim == 4 * c.dim ? json(nullptr) : json(c.hidden_dim)},
         {"n_layer", c.n_layers},
         {"n_head", c.n_heads},
         {"vocab_size", c.vocab_size},
         {"n_positions", c.seq_len},
         {"n_ctx", c.seq_len},
         {"layer_norm_epsilon", json_float(c.norm_eps)},
         {"activation_function", "gelu_new"},
         {"tie_word_embeddings", true}};
  }
  j["torch_dtype"] = torch_dtype(dtype);
  return j.dump(2) + "\n";
}

}  // namespace orion::io
