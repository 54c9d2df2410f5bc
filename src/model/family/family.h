// A model family: everything Orion knows about one transformer architecture, in one place.
//
// The code shared by every family (the layer loop, file containers, the program list, the ANE
// runners, the training loop) asks the family object instead of switching on its id:
//   - its anatomy: which norm, positions, biases and feed-forward its blocks use (the shared code
//     sizes and checks tensors from it: weights.cpp, train/model/params.cpp);
//   - its config: presets, Hugging Face config.json fields, the ".bin" format that holds it;
//   - its tensor names: the Hugging Face checkpoint (read and written here), PEFT adapter modules;
//   - its CPU block (forward; the training block is in train/family/, the layer above);
//   - its ANE kernels: the training and inference kernel tables of program_set.h.
// Each family lives in model/family/<name>/ and is listed once in registry.cpp; its training half
// in train/family/<name>/, listed once in train/family/registry.cpp. docs/adding-a-model-family.md
// walks through adding one.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/frontends/program_set.h"
#include "model/lora/lora.h"
#include "model/transformer.h"

namespace orion {

enum class ModelFormat;
namespace io {
class HfConfigReader;
class HfTensorReader;
}  // namespace io

enum class NormKind { RMSNorm, LayerNorm };  // LayerNorm has a bias beside its gain
enum class Positions { Rope, Learned };      // RoPE on q and k, or a learned table added to x0

// What a block is made of. Shared code derives tensor lists, shapes and parameter counts from it.
struct Anatomy {
  NormKind norm = NormKind::RMSNorm;
  Positions positions = Positions::Rope;
  bool biases = false;     // every linear and norm has a bias (GPT-2)
  bool gated_ffn = false;  // SwiGLU: w1 gate, w3 up, w2 down; else w1 up, w2 down
  bool qkv_bias = false;   // only q, k and v have biases (bq bk bv; Qwen2)
  bool qk_norm = false;    // an RMSNorm over each head of q and of k, before RoPE (q_norm, k_norm [HS]; Qwen3)
};

struct ConfigPreset {
  const char* name;  // "stories15m", "gpt2-124m": what --config takes
  ModelConfig config;
};

// Module names of a PEFT (Hugging Face) LoRA adapter: "base_model.model." + layer_prefix + i + "."
// + module[target] + ".lora_A.weight". Targets sharing a module are one fused matrix (GPT-2's
// c_attn holds q, k and v).
struct PeftLayout {
  const char* layer_prefix;                     // "model.layers."
  const char* module[kLoraTargetCount];         // "self_attn.q_proj"; nullptr: no such projection
  const char* target_module[kLoraTargetCount];  // the adapter_config.json target_modules entry
  bool fan_in_fan_out = false;                  // Conv1D weights stored [in, out]
  bool permuted_qk = false;                     // q/k rows in HF's rotate-half order (io_internal.h)
};

// How llama.cpp's GGUF files hold this family (model/io/gguf_model.cpp reads and writes them; the
// tensor and key names are llama.cpp's, the same for every architecture).
struct GgufLayout {
  const char* arch;        // general.architecture: "llama", "gpt2", "qwen2"
  bool fused_qkv = false;  // one blk.N.attn_qkv tensor (q, k, v rows) instead of attn_q, attn_k, attn_v
  // q/k rows (and the q/k biases and norm gains) in Hugging Face's rotate-half order: llama.cpp keeps
  // them so for the architectures it runs with NEOX-style RoPE (qwen2, qwen3). false: the
  // interleaved-pair order its converter permutes "llama" files into, which is Orion's canonical one.
  bool rotate_half_qk = false;
  // The family of this arch's files that have attention.sliding_window: Mistral, written as "llama"
  // like llama.cpp's converter does; a "llama" file without a window reads as Llama.
  bool windowed = false;
  // output.weight written even when the classifier is the embedding (tied): llama.cpp's gpt2 loader
  // requires it, and its converter writes GPT-2's wte twice. Read back as tied (the same bytes).
  bool output_when_tied = false;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // ---- identity and config ----
  virtual Arch id() const = 0;
  virtual const char* name() const = 0;          // "llama": configs, checkpoints, adapter files
  virtual const char* display_name() const = 0;  // "Llama", for messages
  virtual Anatomy anatomy() const = 0;
  virtual std::vector<ConfigPreset> presets() const = 0;
  // The embedding rows a vocabulary of V tokens is padded to (llm.c pads GPT-2 to a multiple of 64).
  virtual int padded_vocab(int V) const { return V; }
  // The ".bin" format that holds this family (llama2.c for Llama, llm.c for GPT-2), if any.
  virtual std::optional<ModelFormat> bin_format() const = 0;

  // ---- Hugging Face checkpoints ----
  virtual const char* hf_model_type() const = 0;    // config.json's model_type
  virtual const char* hf_architecture() const = 0;  // config.json's architectures entry: "LlamaForCausalLM"
  virtual ModelConfig read_hf_config(const io::HfConfigReader& r) const = 0;
  virtual nlohmann::json hf_config_json(const ModelConfig& c) const = 0;  // without torch_dtype
  virtual void read_hf_tensors(io::HfTensorReader& t, ModelWeights& w) const = 0;
  // The checkpoint's tensors of w in dtype dt; rearranged copies live in scratch.
  virtual std::vector<std::pair<std::string, Tensor>> hf_tensors(const ModelWeights& w, ModelWeights& scratch,
                                                                 DType dt) const = 0;
  virtual const PeftLayout& peft() const = 0;
  // nullopt: Orion reads and writes no GGUF files of this family.
  virtual std::optional<GgufLayout> gguf() const { return std::nullopt; }

  // ---- CPU inference (model/transformer.h) ----
  // Layer `layer` for n tokens at positions pos .. pos+n−1: their keys and values enter cache first.
  virtual void block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                             KvCache& cache, int layer, const LoraLayerRef* lora) const = 0;
  // A whole decode step (every block, final norm, classifier) in one go; false: the Transformer
  // runs the blocks one by one. By default decode_step, the block read from anatomy(); a family
  // whose block the anatomy cannot describe returns false.
  virtual bool decode_token(const ModelWeights& w, Transformer::Activations& a, int pos, KvCache& cache,
                            float* logits) const;

  // ---- ANE kernels (model/frontends/program_set.h) ----
  virtual std::vector<frontends::KernelSpec> training_kernels(int lora_slot) const = 0;
  virtual std::vector<frontends::KernelSpec> inference_kernels() const = 0;
  // True when the inference table holds the family's own inference kernels: prefill kernels that
  // add the residuals themselves, and one-token decode kernels (decode_qkv at the decode bucket,
  // then decode_ffn with the CPU's attention as input). False when it holds the training kernels
  // (no residual adds; decode reuses the attention kernel at position 0 and the CPU applies RoPE,
  // Wo and the residual). infer/ane_model.cpp runs either.
  virtual bool ane_inference_kernels() const = 0;
};

// One token through every block, the final norm and the classifier in one OpenMP parallel region
// (decode_step.cpp), each block as anatomy `an` describes it: a.x [C] holds the embedded token at
// pos (positions added); its keys and values enter cache; logits [V]. Bit-identical to the
// family's block_forward for one token + the final norm and classifier, whatever the thread count.
void decode_step(const Anatomy& an, const ModelWeights& w, Transformer::Activations& a, int pos, KvCache& cache,
                 float* logits);
// y = norm(x) with gain g (and bias b): the block's RMSNorm or LayerNorm as anatomy `an` names it,
// as block_forward computes it for one row (decode_step.cpp; one thread, no parallel region).
//   x, y: [C]
void normalise_row(const Anatomy& an, float* y, const float* x, const Tensor& g, const Tensor& b, int C, float eps);

// The registered families (registry.cpp), in registration order.
const std::vector<const ModelFamily*>& model_families();
const ModelFamily& model_family(Arch id);
// nullptr when no family has that name.
const ModelFamily* find_model_family(const std::string& name);
// The family of a config.json model_type; nullptr when none.
const ModelFamily* find_hf_family(const std::string& model_type);
// "llama, gpt2": for messages listing what Orion runs.
std::string model_family_names();

}  // namespace orion
